/**
 * The thread behind `SessionHost`: it owns onnxruntime sessions and runs them, one request at a time, so the
 * runner's main thread never waits on a model run (see `session-host.ts` for why, `session-wire.ts` for the
 * requests and `session-host-handler.ts` for what each does). Kept to node builtins, onnxruntime-node and
 * `thread-protocol.ts`: this file is loaded by a worker thread, outside any bundler.
 */
import { handleHostRequest } from "./session-host-handler.ts";
import { serveRequests } from "./thread-protocol.ts";

serveRequests(handleHostRequest);
