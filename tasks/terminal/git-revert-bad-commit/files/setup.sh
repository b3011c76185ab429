#!/bin/bash
# Creates the git repository /app/repo with five commits on main.
set -euo pipefail
cd "${APP_DIR:-/app}"
rm -rf repo && mkdir repo && cd repo
git init -q -b main
git config user.name "Dana Developer"
git config user.email "dana@example.invalid"
n=0
commit() {
  n=$((n + 1))
  export GIT_AUTHOR_DATE="2024-02-0${n}T09:30:00+0000" GIT_COMMITTER_DATE="2024-02-0${n}T09:30:00+0000"
  git add -A && git commit -q -m "$1"
}
cat > pricing.py <<'PY'
TAX_RATE = 0.2
DISCOUNT = 0.1


def final_price(net):
    return round(net * (1 - DISCOUNT) * (1 + TAX_RATE), 2)
PY
commit "Add pricing module"
printf '# shop\n\nPricing helpers.\n' > README.md
commit "Add README"
sed -i 's/^DISCOUNT = 0.1$/DISCOUNT = 0.5/' pricing.py
commit "Set discount to 50 percent"
cat > money.py <<'PY'
def fmt(amount, currency="EUR"):
    return f"{amount:.2f} {currency}"
PY
commit "Add currency formatting"
printf '\nSee money.py for formatting.\n' >> README.md
commit "Document money.py"
