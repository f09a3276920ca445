/**
 * Imported before `onnxruntime-node` wherever the runner loads it. onnxruntime 1.29 and later, on Linux and macOS,
 * start Microsoft's telemetry uploader when the library loads: it keeps a device id and an event database under
 * `~/.cache/Microsoft/DeveloperTools/.onnxruntime`, reads `/etc/machine-id`, and leaves `mat-debug-<pid>.log` and
 * `.ses` in the temp folder. A runner converts customers' audio on its operator's machines and reaches out to
 * nothing but the service's API, so the uploader stays off unless the operator sets `ORT_DISABLE_TELEMETRY`
 * (to `0`) themselves. The library reads the variable as it loads: setting it later has no effect.
 */
process.env.ORT_DISABLE_TELEMETRY ??= "1";
