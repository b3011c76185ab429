#!/bin/bash
set -euo pipefail
APP="${APP_DIR:-/app}"
cat > "$APP/svc.sh" <<SH
#!/bin/bash
# Control script for ticker.py: start | stop | status | restart
APP="$APP"
SH
cat >> "$APP/svc.sh" <<'SH'
RUN="$APP/run"
PIDFILE="$RUN/ticker.pid"
LOG="$RUN/ticker.log"

is_running() {
    [ -f "$PIDFILE" ] || return 1
    local pid
    pid=$(cat "$PIDFILE" 2>/dev/null)
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    # a zombie is not running
    [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != "Z" ]
}

do_start() {
    if is_running; then
        echo "already running (pid $(cat "$PIDFILE"))"
        return 0
    fi
    mkdir -p "$RUN"
    nohup python3 "$APP/ticker.py" >> "$LOG" 2>&1 < /dev/null &
    echo $! > "$PIDFILE"
    echo "started (pid $!)"
}

do_stop() {
    if ! is_running; then
        rm -f "$PIDFILE"
        echo "not running"
        return 0
    fi
    local pid i
    pid=$(cat "$PIDFILE")
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = "Z" ] && break
        sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    rm -f "$PIDFILE"
    echo "stopped"
}

case "${1:-}" in
    start) do_start ;;
    stop) do_stop ;;
    status)
        if is_running; then echo "running (pid $(cat "$PIDFILE"))"; else echo "stopped"; exit 3; fi ;;
    restart) do_stop > /dev/null; do_start ;;
    *) echo "usage: $0 {start|stop|status|restart}" >&2; exit 2 ;;
esac
SH
chmod +x "$APP/svc.sh"
"$APP/svc.sh" stop > /dev/null
