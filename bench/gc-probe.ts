// Loaded into a benchmarked process (node --expose-gc --import ./bench/gc-probe.ts): on SIGUSR2
// it collects garbage and writes process.memoryUsage() to $BENCH_GC_PROBE_FILE, so a benchmark
// reads the memory the process retains, not the garbage the collector has not got to yet.
// The collection is V8's memory-reducing one ("last resort": it compacts and releases the pages it
// freed): after a plain gc() V8 keeps the freed pages pooled and resident, up to tens of MiB, so
// RSS read after it still held the garbage's pages.
import { writeFileSync } from "node:fs";

type Gc = (options?: { type?: string; execution?: string; flavor?: string }) => void;
const file = process.env.BENCH_GC_PROBE_FILE;
const gc = (globalThis as { gc?: Gc }).gc;
if (file && gc) {
  process.on("SIGUSR2", () => {
    gc({ type: "major", execution: "sync", flavor: "last-resort" });
    writeFileSync(file, JSON.stringify(process.memoryUsage()));
  });
}
