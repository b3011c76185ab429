#!/bin/bash
set -euo pipefail
APP="${APP_DIR:-/app}"
cat > "$APP/env.sh" <<SH
# Profile for the application; source it: . $APP/env.sh
export APP_ENV=production
export APP_PORT=9000
export DATA_DIR="$APP/data"
mkdir -p "\$DATA_DIR"
case ":\$PATH:" in
    *":$APP/bin:"*) ;;
    *) export PATH="$APP/bin:\$PATH" ;;
esac
SH
chmod +x "$APP/bin/hello"
