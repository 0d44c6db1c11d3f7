import { Option } from 'commander';
import { createCommand, lazy } from '../define.js';
import { collect, durationArg, PROFILE_OPTIONS } from '../args.js';

export default createCommand({
  name: 'upgrade',
  args: [['<profile>', 'a running profile (its replicas, and its router when it has one)']],
  description:
    'try a new image or vLLM on a canary, compare it with the running replicas on the same requests, then roll it out one replica at a time, or roll back',
  options: [
    [
      '--image <ref>',
      'the candidate image (engine.runtime container): pinned to its digest (or image ID) before anything starts',
    ],
    [
      '--vllm <version>',
      'the candidate vLLM version (the simulator plays it; on the host, the vllm of --vllm-bin must be it)',
    ],
    ['--vllm-bin <path>', "the candidate's vllm executable (another environment); its version is read from it"],
    [
      '--candidate-set <field=value>',
      'a profile override for the candidate only, kept with its pin (a flag the new vLLM needs, a chat-template file); repeatable',
      collect,
      [],
    ],
    [
      '--canary-gpus <list>',
      "without a router: the canary beside the replicas on these GPUs (a comma list, contiguous, as many as one replica uses: 4,5); serve's co-location rule still decides",
    ],
    [
      '--nodes <file>',
      'a profile served over nodes: the nodes file (default: the one its record names; the same nodes either way)',
    ],
    [
      '--canary-nodes <file>',
      "over nodes: spare nodes (their own nodes file, none of the server's, the server's shape) where the candidate runs as PROFILE-canary beside the running server, compared first; only a pass upgrades the server",
    ],
    ['--rollback', 'back to the pin before the current one, the same way (canary, compare, roll)'],
    ['--no-roll', 'compare only: the canary is undone whatever the verdict'],
    [
      '--no-pull',
      "never pull: an --image that is not here is refused (by default upgrade pulls it with the runtime's own pull, 30 min deadline, progress on stderr)",
    ],
    [
      '--dry-run',
      'show what changes (options, changed defaults and renames, metrics, the memory plan), where the canary would run and the thresholds; start nothing',
    ],
    new Option(
      '--drain-timeout <duration>',
      "wait this long for a drained replica's requests in flight, then stop it anyway (its stop drains)",
    )
      .argParser(durationArg('--drain-timeout', 'ms', true))
      .default(600_000, '10m'),
    ['--json', 'machine-readable output'],
    ...PROFILE_OPTIONS,
  ],
  help: `
The candidate is resolved first: an --image that is not here is pulled (the runtime's own pull, with
a deadline and its progress on stderr; --no-pull refuses instead, --dry-run says it would pull and
pulls nothing), then pinned to its digest (a vLLM to its version), and what changes
between the two vLLMs is shown: options removed, added or deprecated (from vLLM's own tables),
profile flags the candidate refuses (refused: exit 2, nothing starts), metric names that change;
and, from each side's own \`vllm serve --help=all\` (the host's vllm, in the image, or the simulator;
cached in the state folder by image ID or install), the defaults that change for options the profile
leaves to vLLM (the candidate runs with its own) and the renames vLLM's help names, with the fix.
With a router and two or more replicas the canary replaces the last replica (drained first, the
others serving); otherwise it runs beside them as PROFILE-canary on a free port where the GPUs
allow. Canary and current get the same requests: the deep probe, the profile's golden prompts
(greedy: identical within one vLLM, a stated similarity across versions; completions, a chat turn,
and a tool call where engine.toolCallParser is set), the chat template's output for fixed conversations (/tokenize, token for token) and a short
bench (TTFT, time per output token, throughput), judged by the profile's upgrade: thresholds. A pass rolls the rest one replica
at a time; a failure puts the canary back and changes nothing else. Every upgrade is recorded
(sparkctl report shows it) and pinned in the state folder, so --rollback knows where to go. An
--image that is the very image the replicas run (another tag of it) starts nothing: said, exit 0.

Over nodes (a profile served with serve --nodes) the server is upgraded IN PLACE, all its nodes
together: there is NO SERVICE from the stop of the running cluster until the candidate (or, on a
failure, the previous pin) is ready again; the plan says so. An --image is first put on every node
by ID (pulled here when it is not, unless --no-pull; then copied, podman|docker save | ssh NODE
load, to each node that lacks it or holds another build under the same reference) and read back:
one image ID on every node, else refused naming the nodes and the IDs, before anything stops.
The plan shows the --help=all changes as on one host, both images' tables read here by that ID.
--no-pull copies nothing (every node must hold it already). The running cluster is measured first
and kept; it is stopped on every node, the candidate served over every node together (pinned to
that image ID), measured with the same requests and judged by the same thresholds; a failure stops
it and serves the previous pin again over every node (exit 1, saying why). With --canary-nodes
FILE (spare nodes: none of the server's, as many as it has, each with the GPUs of one of its
nodes) the candidate is first served there as PROFILE-canary beside the running server, prewarmed,
probed and compared with it on the same requests; it is stopped whatever the verdict, and only a
pass goes on to the in-place upgrade (a failure: nothing else changes, exit 1). --rollback works
the same way over the nodes.

Exit codes: 0 rolled (or compared with --no-roll and passed, or nothing to do), 1 the canary failed its comparison
(everything as it was), 2 bad input (a refused flag, no previous pin, an image its registry does not
have or refuses, over nodes: the candidate not the same image ID on every node, --canary-nodes overlapping the server's nodes or of
another shape, or the candidate refused as bad input when served there), 3 the image's registry
could not be reached (or the pull's deadline passed), 4 a replica did not come back, or the pull failed
here (over nodes: neither the candidate nor the previous pin serves healthy: said in red).

Examples:
  sparkctl upgrade qwen-prod --image nvcr.io/nvidia/vllm:26.05-py3 --dry-run
  sparkctl upgrade qwen-prod --image nvcr.io/nvidia/vllm:26.05-py3
  sparkctl upgrade qwen-dev --vllm-bin /opt/vllm-0.28/bin/vllm --no-roll
  sparkctl upgrade qwen-prod --rollback
  sparkctl upgrade qwen3-200b --image localhost/vllm:0.12 --dry-run      (over nodes: the in-place plan)
  sparkctl upgrade qwen3-200b --image localhost/vllm:0.12 --canary-nodes spare.yaml   (a canary cluster first)`,
  handler: lazy(() => import('./run.js')),
});
