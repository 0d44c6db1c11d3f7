// A counting semaphore for --concurrency: FIFO, so the oldest scheduled request goes first.
export class Semaphore {
  private waiters: Array<() => void> = [];
  constructor(private free: number) {}
  acquire(): Promise<void> | undefined {
    if (this.free > 0) {
      this.free--;
      return undefined;
    }
    return new Promise((r) => this.waiters.push(r));
  }
  release() {
    const w = this.waiters.shift();
    if (w) w();
    else this.free++;
  }
}
