// Values that are printable yet mean something to YAML, sh, Kubernetes, systemd, Prometheus, HTML
// and JSON all at once: generated text must carry them as values, never as syntax.
export const HOSTILE = `q'w"e$(VLLM_API_KEY) \`id\`;touch PWNED #{}: &a *a !!str --- \${HOME} %n %% \\ end <b>&amp;</b><script>x()</script>`;
