import { createCommand, lazy } from '../define.js';
import { countArg } from '../args.js';

export default createCommand({
  name: 'pull',
  args: [['<model>', 'a Hugging Face model id (ORG/NAME) or a profile whose model.id (and model.revision) to fetch']],
  description:
    'download a model into the Hugging Face cache: the files vLLM loads, SHA-256 verified, resumable, readable offline',
  options: [
    [
      '--revision <rev>',
      "branch, tag or commit (default: the profile's model.revision, else main); resolved to a commit once and recorded in refs/",
    ],
    [
      '--config-only',
      'only the config, tokenizer and generation files (what plan, profiles init and serve --dry-run read)',
    ],
    ['--jobs <n>', 'files fetched at once', countArg('--jobs'), 8],
    [
      '--nodes <file>',
      'then copy the snapshot to every node of this inventory over ssh (rsync where both ends have it), and for a profile with engine.runtime: container its image (save | ssh load), skipping nodes that already match',
    ],
    ['--profiles <dir>', 'also read profiles from DIR (or SPARKCTL_PROFILES)'],
    ['--json', 'machine-readable result on stdout; no progress'],
  ],
  help: `
Where: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub (as huggingface_hub), in its
layout (models--ORG--NAME/blobs, snapshots/COMMIT, refs/), so vLLM and transformers read it with
HF_HUB_OFFLINE=1. The Hub is $HF_ENDPOINT (a mirror) or https://huggingface.co. A gated or private
repository needs a read token in the environment: export HF_TOKEN=... (never on the command line).

Only the files vLLM loads: config, tokenizer and generation files, and the safetensors shards the
index names (no *.bin, *.pth or original/ duplicates when safetensors exist). Disk space is checked
before the first byte; every file is checked against the Hub's SHA-256 before it enters the
snapshot; an interrupted pull (Ctrl-C, kill, a dropped connection) resumes where it stopped.
A file must arrive at 1 MiB per 60 s at least (SPARKCTL_PULL_MIN_BYTES per SPARKCTL_PULL_WINDOW_S):
a slower mirror is cut off (exit 3, the bytes kept for the next pull).

Examples:
  sparkctl pull Qwen/Qwen3.5-9B
  sparkctl pull qwen3.5-9b --config-only          the profile's model, config and tokenizer only
  sparkctl pull Qwen/Qwen3.5-9B --revision v1.0   a tag, pinned to its commit
  sparkctl pull qwen3-200b --nodes nodes.yaml     pulled once here, copied to each node (its fabric address when named)

Exit codes: 0 pulled, 1 a file failed its checksum or the Hub sent something malformed, 2 bad input
(unknown model, 401/403, not enough disk), 3 the Hub could not be reached; with --nodes, 1 when a
node could not be given the snapshot (each node's line says why).`,
  handler: lazy(() => import('./run.js')),
});
