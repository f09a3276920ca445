/**
 * `GET /docs`: the API reference, rendered in the browser from `/openapi.json` by a small inline script.
 * Self-contained: no fonts, scripts or styles from the internet.
 */
import { defineRoute } from "../../http/route.ts";

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Voice Conversion API reference</title>
<link rel="icon" href="/playground/icon.svg" type="image/svg+xml">
<style>
  :root { color-scheme: light dark; --fg: #1b1f24; --muted: #5b6470; --bg: #fff; --card: #f5f7fa; --accent: #3b5bdb; }
  @media (prefers-color-scheme: dark) { :root { --fg: #e6e8eb; --muted: #9aa4b2; --bg: #14171b; --card: #1d2127; --accent: #8ea6ff; } }
  body { font: 15px/1.5 system-ui, sans-serif; margin: 0; color: var(--fg); background: var(--bg); }
  header { padding: 24px 32px; border-bottom: 1px solid color-mix(in srgb, var(--muted) 30%, transparent); }
  main { display: grid; grid-template-columns: 260px minmax(0, 1fr); }
  nav { padding: 16px; position: sticky; top: 0; align-self: start; max-height: 100vh; overflow: auto; }
  nav a { display: block; color: var(--fg); text-decoration: none; padding: 2px 0; font-size: 13px; }
  section { padding: 16px 32px; }
  .op { background: var(--card); border-radius: 8px; padding: 12px 16px; margin: 12px 0; }
  .method { font: 600 12px ui-monospace, monospace; padding: 2px 6px; border-radius: 4px; color: #fff; }
  .GET { background: #2f9e44; } .POST { background: #1c7ed6; } .PATCH { background: #f08c00; } .DELETE { background: #e03131; } .PUT { background: #7048e8; }
  code, pre { font: 13px ui-monospace, monospace; } pre { overflow: auto; background: var(--bg); padding: 8px; border-radius: 6px; }
  .muted { color: var(--muted); } h2 { margin-top: 32px; } table { border-collapse: collapse; } td, th { padding: 2px 8px; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
  p, code, nav a { overflow-wrap: anywhere; } td:first-child, td:first-child code { white-space: nowrap; overflow-wrap: normal; }
  /* A phone: the operations list above the reference, both the screen's width. */
  @media (max-width: 720px) { main { grid-template-columns: minmax(0, 1fr); } nav { position: static; max-height: 40vh; } header, section { padding-left: 16px; padding-right: 16px; } }
</style>
</head>
<body>
<header><h1 id="title">Voice Conversion API</h1><p id="description" class="muted"></p>
<p class="muted">Machine-readable: <a href="/openapi.json">/openapi.json</a></p></header>
<main><nav id="nav"></nav><section id="content">Loading…</section></main>
<script>
const esc = (s) => String(s ?? "").replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
function typeOf(schema) {
  if (!schema) return "";
  if (schema.$ref) return schema.$ref.split("/").pop();
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(" | ");
  if (schema.anyOf || schema.oneOf) return (schema.anyOf || schema.oneOf).map(typeOf).join(" | ");
  if (schema.type === "array") return typeOf(schema.items) + "[]";
  return Array.isArray(schema.type) ? schema.type.join(" | ") : (schema.format ? schema.type + " (" + schema.format + ")" : schema.type || "object");
}
function example(schema, depth = 0) {
  if (!schema || depth > 6) return null;
  if (schema.example !== undefined) return schema.example;
  if (schema.default !== undefined) return schema.default;
  if (schema.enum) return schema.enum[0];
  if (schema.anyOf || schema.oneOf) return example((schema.anyOf || schema.oneOf)[0], depth + 1);
  if (schema.type === "object" || schema.properties) {
    const out = {};
    for (const [k, v] of Object.entries(schema.properties || {})) out[k] = example(v, depth + 1);
    return out;
  }
  if (schema.type === "array") return [example(schema.items, depth + 1)];
  if (schema.format === "uuid") return "00000000-0000-4000-8000-000000000000";
  if (schema.format === "date-time") return "2026-01-01T00:00:00.000Z";
  return { string: "string", integer: 0, number: 0, boolean: false }[Array.isArray(schema.type) ? schema.type[0] : schema.type] ?? null;
}
function fields(schema) {
  if (!schema?.properties) return "";
  const required = new Set(schema.required || []);
  return "<table>" + Object.entries(schema.properties).map(([k, v]) =>
    "<tr><td><code>" + esc(k) + "</code>" + (required.has(k) ? " *" : "") + "</td><td class=muted>" + esc(typeOf(v)) + "</td><td>" + esc(v.description) + "</td></tr>").join("") + "</table>";
}
fetch("/openapi.json").then((r) => r.json()).then((doc) => {
  document.getElementById("title").textContent = doc.info.title + " " + doc.info.version;
  document.getElementById("description").textContent = doc.info.description || "";
  const byTag = {};
  for (const [path, ops] of Object.entries(doc.paths)) for (const [method, op] of Object.entries(ops)) {
    const tag = (op.tags || ["Other"])[0];
    (byTag[tag] ||= []).push({ path, method: method.toUpperCase(), op });
  }
  let nav = "", html = "";
  for (const [tag, ops] of Object.entries(byTag)) {
    nav += "<strong>" + esc(tag) + "</strong>";
    html += "<h2 id='" + esc(tag) + "'>" + esc(tag) + "</h2>";
    for (const { path, method, op } of ops) {
      const id = method + path.replace(/[^a-z0-9]+/gi, "-");
      nav += "<a href='#" + id + "'>" + method + " " + esc(path) + "</a>";
      html += "<div class=op id='" + id + "'><p><span class='method " + method + "'>" + method + "</span> <code>" + esc(path) + "</code> — " + esc(op.summary) + (op.security ? " <span class=muted>(bearer token)</span>" : "") + "</p>";
      const params = op.parameters || [];
      if (params.length) html += "<p><b>Parameters</b></p><table>" + params.map((p) => "<tr><td><code>" + esc(p.name) + "</code></td><td class=muted>" + esc(p.in) + (p.required ? ", required" : "") + "</td><td class=muted>" + esc(typeOf(p.schema)) + "</td></tr>").join("") + "</table>";
      const [bodyType, bodyContent] = Object.entries(op.requestBody?.content || {})[0] || [];
      const body = bodyContent?.schema;
      if (body) {
        const sample = example(body);
        const shown = bodyType === "application/json" ? JSON.stringify(sample, null, 2) : new URLSearchParams(sample).toString();
        html += "<p><b>Request body</b> <span class=muted>" + esc(bodyType) + "</span></p>" + fields(body) + "<pre>" + esc(shown) + "</pre>";
      }
      html += "<p><b>Responses</b></p><table>" + Object.entries(op.responses || {}).map(([status, r]) => "<tr><td><code>" + status + "</code></td><td>" + esc(r.description) + "</td></tr>").join("") + "</table>";
      const ok = Object.entries(op.responses || {}).find(([s]) => s.startsWith("2"));
      const okSchema = ok?.[1]?.content?.["application/json"]?.schema;
      if (okSchema) html += "<pre>" + esc(JSON.stringify(example(okSchema), null, 2)) + "</pre>";
      html += "</div>";
    }
  }
  document.getElementById("nav").innerHTML = nav;
  document.getElementById("content").innerHTML = html;
}).catch((e) => { document.getElementById("content").textContent = "Could not load /openapi.json: " + e; });
</script>
</body>
</html>`;

export const docsRoute = defineRoute({
	method: "GET",
	path: "/docs",
	auth: "none",
	internal: true,
	summary: "API reference page",
	tags: ["Meta"],
	responses: { 200: { description: "HTML page" } },
	handler: () =>
		new Response(PAGE, {
			headers: {
				"Content-Type": "text/html; charset=utf-8",
				// The page only talks to this origin, and no other site may frame it.
				"Content-Security-Policy":
					"default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
				"X-Content-Type-Options": "nosniff",
				"X-Frame-Options": "DENY",
				"Referrer-Policy": "no-referrer",
			},
		}),
});
