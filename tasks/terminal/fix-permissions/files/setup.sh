#!/bin/bash
# Creates /app/deploy with wrong permissions (git keeps only the executable bit).
set -euo pipefail
cd "${APP_DIR:-/app}"
rm -rf deploy
mkdir -p deploy/bin deploy/config deploy/secrets deploy/shared deploy/docs
printf '#!/bin/bash\necho starting\n' > deploy/bin/start.sh
printf '#!/bin/bash\necho stopping\n' > deploy/bin/stop.sh
printf 'helper functions, not a script\n' > deploy/bin/README.txt
printf 'port = 8080\n' > deploy/config/app.conf
printf 'level = info\n' > deploy/config/logging.conf
printf 'super-secret-key\n' > deploy/secrets/db.key
printf 'token-123\n' > deploy/secrets/api.token
printf 'shared notes\n' > deploy/shared/notes.txt
printf 'how to deploy\n' > deploy/docs/guide.md
chmod 644 deploy/bin/start.sh deploy/bin/README.txt
chmod 600 deploy/bin/stop.sh
chmod 666 deploy/config/app.conf deploy/docs/guide.md
chmod 644 deploy/config/logging.conf deploy/secrets/db.key
chmod 664 deploy/secrets/api.token
chmod 755 deploy/secrets
chmod 777 deploy/shared
chmod 646 deploy/shared/notes.txt
