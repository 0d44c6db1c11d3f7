#!/usr/bin/env bash
# Deep-probe every registered vLLM server; quiet when all is well (cron mails only output).
#   */5 * * * * /opt/sparkctl/scripts/cron-probe.sh
# Environment: SPARKCTL (how to run sparkctl), SPARKCTL_STATE_DIR, PROM_FILE (node_exporter
# textfile), ALERT_WEBHOOK (POSTed only when a server changes state), PROBE_TIMEOUT (each
# step's deadline: 500ms, 10s, ...), PROBE_DEADLINE (the whole run's, below the cron interval so
# runs never stack; default 4m). Every run appends to the history `sparkctl cost` and `report` read.
set -uo pipefail
SPARKCTL=${SPARKCTL:-sparkctl}
args=(probe --all --quiet --step-timeout "${PROBE_TIMEOUT:-10s}" --deadline "${PROBE_DEADLINE:-4m}")
[ -n "${PROM_FILE:-}" ] && args+=(--prometheus "$PROM_FILE")
[ -n "${ALERT_WEBHOOK:-}" ] && args+=(--alert-webhook "$ALERT_WEBHOOK")
export NO_COLOR=1
# shellcheck disable=SC2086
exec $SPARKCTL "${args[@]}"
