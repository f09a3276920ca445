/**
 * `GET /playground/defaults.json`: in local development the playground is prefilled with the demo client's
 * credentials, which `npm run dev` hands to the Worker as variables. Anywhere else the variables are unset and
 * this answers 404, so production never exposes credentials.
 */
import { notFound } from "../../http/errors.ts";
import { defineRoute } from "../../http/route.ts";

export const playgroundDefaultsRoute = defineRoute({
	method: "GET",
	path: "/playground/defaults.json",
	auth: "none",
	internal: true,
	summary: "Local-development defaults for the playground",
	tags: ["Meta"],
	responses: { 200: { description: "Demo client credentials" }, 404: { description: "Not local development" } },
	handler({ env }) {
		if (!env.PLAYGROUND_CLIENT_ID || !env.PLAYGROUND_CLIENT_SECRET) throw notFound("Playground defaults");
		return Response.json(
			{ client_id: env.PLAYGROUND_CLIENT_ID, client_secret: env.PLAYGROUND_CLIENT_SECRET },
			{ headers: { "Cache-Control": "no-store" } },
		);
	},
});
