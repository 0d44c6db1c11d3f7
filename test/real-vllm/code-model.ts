// The tiny Qwen3 with a context that holds Claude Code's first request (32,115 tokens with the
// tiny model's 2,048-token BPE vocabulary): the same tokenizer, max_position_embeddings 65,536, and
// a chat template that renders the request's tools (and tool calls and results) the way Qwen3.5's
// does, in the qwen3_coder XML format. Without the tools in the template vLLM would not count
// Claude Code's 24 tool definitions against the context, and the context check this model exists
// for would test nothing.
// Its answers end: the random model ran 3,766 tokens of noise for one "Say hello" (66 s on 2 CPU
// cores). Here the embedding's first dimension is +5 for every token with a visible character and
// -5 for whitespace and special tokens, and an untied lm_head scores end-of-turn (<|im_end|>) by
// that dimension alone (x10). After the prompt's closing newline end-of-turn is all but impossible;
// after the first visible token it is all but certain (a logit of about +80 against noise of 0.2).
// So an answer is one visible token of noise (plus any whitespace before it), then end_turn.
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const CODE_CONTEXT = 65_536;

const TEMPLATE = [
  '{% if tools %}<|im_start|>system\n',
  "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}",
  '# Tools\n\nYou have access to the following functions:\n\n<tools>',
  '{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools>\n\n',
  'If you choose to call a function, reply in this format:\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n</function>\n</tool_call><|im_end|>\n',
  "{% elif messages[0].role == 'system' %}<|im_start|>system\n{{ messages[0].content }}<|im_end|>\n{% endif %}",
  '{% for message in messages %}',
  "{% if message.role == 'system' and loop.first %}",
  "{% elif message.role == 'assistant' %}<|im_start|>assistant\n{{ message.content or '' }}",
  '{% for tc in message.tool_calls or [] %}\n<tool_call>\n<function={{ tc.function.name }}>\n',
  '{% if tc.function.arguments is mapping %}{% for k, v in tc.function.arguments.items() %}<parameter={{ k }}>\n{{ v if v is string else (v | tojson) }}\n</parameter>\n{% endfor %}',
  '{% else %}{{ tc.function.arguments }}\n{% endif %}</function>\n</tool_call>{% endfor %}<|im_end|>\n',
  "{% elif message.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ message.content or '' }}\n</tool_response><|im_end|>\n",
  "{% else %}<|im_start|>{{ message.role }}\n{{ message.content or '' }}<|im_end|>\n",
  '{% endif %}{% endfor %}',
  '{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}',
].join('');

/** Writes the long-context tiny model into dir from the tiny model in from; returns dir. */
export function makeCodeModel(from: string, dir: string): string {
  if (existsSync(join(dir, 'config.json'))) return dir;
  mkdirSync(dir, { recursive: true });
  for (const f of ['tokenizer.json', 'special_tokens_map.json', 'generation_config.json'])
    copyFileSync(join(from, f), join(dir, f));
  const cfg = JSON.parse(readFileSync(join(from, 'config.json'), 'utf8'));
  const vocab: Record<string, number> = JSON.parse(readFileSync(join(from, 'tokenizer.json'), 'utf8')).model.vocab;
  writeFileSync(
    join(dir, 'model.safetensors'),
    endingWeights(readFileSync(join(from, 'model.safetensors')), vocab, cfg.eos_token_id, cfg.hidden_size),
  );
  writeFileSync(
    join(dir, 'config.json'),
    JSON.stringify({ ...cfg, max_position_embeddings: CODE_CONTEXT, tie_word_embeddings: false }, null, 2),
  );
  const tok = JSON.parse(readFileSync(join(from, 'tokenizer_config.json'), 'utf8'));
  writeFileSync(
    join(dir, 'tokenizer_config.json'),
    JSON.stringify({ ...tok, model_max_length: CODE_CONTEXT, chat_template: TEMPLATE }, null, 2),
  );
  return dir;
}

const BF16 = (x: number) => {
  const f = new Float32Array([x]);
  return new Uint32Array(f.buffer)[0]! >>> 16;
};

/** The tiny model's weights with an end-of-turn that follows the first visible token (see the top of this file). */
function endingWeights(st: Buffer, vocab: Record<string, number>, eos: number, hidden: number): Buffer {
  const n = Number(st.readBigUInt64LE(0));
  const header = JSON.parse(st.subarray(8, 8 + n).toString('utf8')) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const data = st.subarray(8 + n);
  const tensors = new Map<string, Buffer>();
  for (const [k, v] of Object.entries(header))
    if (k !== '__metadata__') tensors.set(k, Buffer.from(data.subarray(v.data_offsets[0], v.data_offsets[1])));
  const embed = tensors.get('model.embed_tokens.weight')!;
  const rows = header['model.embed_tokens.weight']!.shape[0]!;
  const visible = new Set<number>();
  // byte-level BPE: Ġ space, Ċ newline, ĉ tab, č carriage return
  for (const [tok, id] of Object.entries(vocab)) if (id > 2 && /[^\u0120\u010a\u0109\u010d]/.test(tok)) visible.add(id);
  const head = Buffer.from(embed);
  for (let r = 0; r < rows; r++) embed.writeUInt16LE(BF16(visible.has(r) ? 5 : -5), r * hidden * 2);
  for (let c = 0; c < hidden; c++) head.writeUInt16LE(BF16(c === 0 ? 10 : 0), (eos * hidden + c) * 2);
  tensors.set('lm_head.weight', head);
  const meta: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  let off = 0;
  for (const [k, b] of tensors) {
    const shape = k === 'lm_head.weight' ? header['model.embed_tokens.weight']!.shape : header[k]!.shape;
    meta[k] = { dtype: 'BF16', shape, data_offsets: [off, off + b.length] };
    off += b.length;
  }
  let json = JSON.stringify(meta);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  return Buffer.concat([len, Buffer.from(json), ...tensors.values()]);
}
