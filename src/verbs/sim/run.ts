export async function run(model: string, rest: string[]) {
  const { simServe } = await import('../../sim/main.js');
  await simServe([model, ...(rest ?? [])]);
}
