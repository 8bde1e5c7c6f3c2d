// Output through Bun's own file writer: the first process.stdout/stderr.write builds Node's
// stream machinery, which measured about 35 ms of CPU at start-up, a third of lag's budget.
export async function writeOut(text: string): Promise<void> {
  await Bun.write(Bun.stdout, text)
}

export async function writeErr(text: string): Promise<void> {
  await Bun.write(Bun.stderr, text)
}
