// Runs in every test file before the file itself: the afterAll registered here is the file's first,
// so (vitest runs afterAll hooks in reverse order, sequence.hooks "stack") it runs last, after the
// file's own afterAll hooks have stopped its managers and processes. Nothing is left to write into
// the namespaces while they are removed.
import { afterAll } from "vitest";
import { deleteTestNamespaces } from "../support/kube.js";

afterAll(() => deleteTestNamespaces(), 60_000);
