# vLLM's own KV-cache sizing for several models in ONE Python process: each `vllm serve` argv that
# sparkctl rendered (serve --dry-run --json) is parsed by vLLM's own serve parser (make_arg_parser,
# as `vllm serve` builds it), its non-default args logged by vLLM's own log_non_default_args (the
# line `vllm serve` writes), and built into vLLM's engine (AsyncEngineArgs.from_cli_args, as serve
# does) with the engine core and its worker in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0). The
# engine initialises exactly as a served one does: model load, the KV-cache specs of its layers,
# kv_cache_utils' grouping and capacity, which logs "GPU KV cache size: N tokens, Maximum
# concurrency ...". What a server adds (the API process, the engine core and worker processes) costs
# three imports of vLLM a model on this CPU build (platforms/cpu.py forces the spawn start method and
# the mp executor: a start is ~15-20 s an import on 2 busy cores, under 1 s of real work for a tiny
# model); here there is one import for all of them.
#
# A job with "spec" instead of "argv" (a family whose model class does not load on this build) runs
# kv_spec_check.py on those arguments in this process: vLLM's own KV-cache functions on its specs,
# without a second import of vLLM.
#
# Usage: python kv_engine.py '[{"name": N, "argv": [".../vllm", "serve", MODEL, ...]} | {"name": N, "spec": {...}}, ...]'
# Output (stdout, vLLM's logger included): "=== begin N", vLLM's own lines (or kv_spec_check.py's
# JSON line), "=== end N" per job.
import gc
import json
import os
import runpy
import sys

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"

from vllm.distributed import cleanup_dist_env_and_memory  # noqa: E402
from vllm.engine.arg_utils import AsyncEngineArgs  # noqa: E402
from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args  # noqa: E402
from vllm.entrypoints.serve.utils.api_utils import log_non_default_args  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402
from vllm.model_executor.models import registry  # noqa: E402
from vllm.v1.engine.llm_engine import LLMEngine  # noqa: E402

# vLLM inspects a model class (is it hybrid, does it take prefix caching, ...) in a subprocess, to keep
# CUDA out of its parent (model_executor/models/registry.py, _run_in_subprocess): one more import of
# vLLM per model class, unless VLLM_CACHE_ROOT/modelinfos already holds the answer. On this CPU build
# there is no CUDA to keep out: the same function runs on the same class here, in this process.
registry._run_in_subprocess = lambda fn: fn()

SPEC_CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kv_spec_check.py")

for job in json.loads(sys.argv[1]):
    if "spec" in job:
        print(f"=== begin {job['name']}", flush=True)
        saved, sys.argv = sys.argv, [SPEC_CHECK, json.dumps(job["spec"])]
        try:
            runpy.run_path(SPEC_CHECK, run_name="__main__")
        finally:
            sys.argv = saved
        print(f"=== end {job['name']}", flush=True)
        continue
    argv = job["argv"]
    if len(argv) < 3 or argv[1] != "serve":
        sys.exit(f"{job['name']}: not a `vllm serve` argv: {argv[:3]}")
    print(f"=== begin {job['name']}", flush=True)
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(argv[2:])
    if args.model_tag is not None:
        args.model = args.model_tag  # entrypoints/cli/serve.py does the same
    validate_parsed_serve_args(args)
    log_non_default_args(args)
    engine = LLMEngine.from_engine_args(AsyncEngineArgs.from_cli_args(args))
    engine.engine_core.shutdown()
    del engine
    gc.collect()
    cleanup_dist_env_and_memory()
    sys.stderr.flush()
    print(f"=== end {job['name']}", flush=True)
