/** Every HTTP route of the Worker, in one list: the router and the OpenAPI document are both built from it. */
import { tokenRoute } from "../auth/token-endpoint.ts";
import { buildOpenApiDocument } from "../http/openapi.ts";
import { defineRoute, type RouteDefinition } from "../http/route.ts";
import { storageRoutes } from "../storage/storage-routes.ts";
import { runnerRoutes } from "./internal/index.ts";
import { createConversionRoute } from "./voice-conversions/create-conversion.ts";
import { getConversionRoute } from "./voice-conversions/get-conversion.ts";
import { listConversionsRoute } from "./voice-conversions/list-conversions.ts";
import { getVoiceRoute } from "./voices/get-voice.ts";
import { listVoicesRoute } from "./voices/list-voices.ts";

const apiRoutes: RouteDefinition[] = [
	tokenRoute,
	listVoicesRoute,
	getVoiceRoute,
	createConversionRoute,
	listConversionsRoute,
	getConversionRoute,
	...runnerRoutes,
	...storageRoutes,
];

const openApiRoute = defineRoute({
	method: "GET",
	path: "/openapi.json",
	auth: "none",
	internal: true,
	summary: "OpenAPI document",
	tags: ["Meta"],
	responses: { 200: { description: "OpenAPI 3.1 document" } },
	handler: ({ url }) => Response.json(buildOpenApiDocument(apiRoutes, url.origin)),
});

export const routes: RouteDefinition[] = [...apiRoutes, openApiRoute];
