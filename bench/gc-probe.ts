// Loaded into a benchmarked process (node --expose-gc --import ./bench/gc-probe.ts): on SIGUSR2
// it collects garbage and writes process.memoryUsage() to $BENCH_GC_PROBE_FILE, so a benchmark
// reads the memory the process retains, not the garbage the collector has not got to yet.
import { writeFileSync } from "node:fs";

const file = process.env.BENCH_GC_PROBE_FILE;
const gc = (globalThis as { gc?: () => void }).gc;
if (file && gc) {
  process.on("SIGUSR2", () => {
    gc();
    gc();
    writeFileSync(file, JSON.stringify(process.memoryUsage()));
  });
}
