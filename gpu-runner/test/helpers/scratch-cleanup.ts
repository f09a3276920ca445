// A setup file: registered before a test file's own hooks, so this `afterAll` runs after them (hooks run as a
// stack), once whatever the file started in its scratch folders (a runner process, a worker thread) has stopped.
import { afterAll } from "vitest";
import { removeScratchDirs } from "./scratch.ts";

afterAll(removeScratchDirs);
