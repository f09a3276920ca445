/** Every HTTP route of the Worker, in one list: the router and the OpenAPI document are both built from it. */

import { conversionWaitLimitSeconds, describeConversionTimeLimits } from "../conversions/wait-limit.ts";
import { buildOpenApiDocument } from "../http/openapi.ts";
import { defineRoute, type RouteDefinition } from "../http/route.ts";
import { deleteAudioFileRoute } from "./audio-files/delete-audio-file.ts";
import { getAudioFileRoute } from "./audio-files/get-audio-file.ts";
import { listAudioFilesRoute } from "./audio-files/list-audio-files.ts";
import { regenerateUploadUrlRoute } from "./audio-files/regenerate-upload-url.ts";
import { registerAudioFileRoute } from "./audio-files/register-audio-file.ts";
import { docsRoute } from "./docs/docs-page.ts";
import { playgroundDefaultsRoute } from "./docs/playground-defaults.ts";
import { runnerRoutes } from "./internal/index.ts";
import { tokenRoute } from "./oauth/token-endpoint.ts";
import { storageRoutes } from "./storage/storage-routes.ts";
import { createConversionRoute } from "./voice-conversions/create-conversion.ts";
import { getConversionRoute } from "./voice-conversions/get-conversion.ts";
import { listConversionsRoute } from "./voice-conversions/list-conversions.ts";
import { completeVoiceFileRoute } from "./voices/complete-voice-file.ts";
import { createVoiceRoute } from "./voices/create-voice.ts";
import { deleteVoiceRoute } from "./voices/delete-voice.ts";
import { getVoiceRoute } from "./voices/get-voice.ts";
import { listVoicesRoute } from "./voices/list-voices.ts";
import { regenerateVoiceUploadUrlsRoute } from "./voices/regenerate-voice-upload-urls.ts";
import { updateVoiceRoute } from "./voices/update-voice.ts";
import { webhookRoutes } from "./webhooks/index.ts";

const apiRoutes: RouteDefinition[] = [
	tokenRoute,
	listVoicesRoute,
	getVoiceRoute,
	createVoiceRoute,
	updateVoiceRoute,
	deleteVoiceRoute,
	completeVoiceFileRoute,
	regenerateVoiceUploadUrlsRoute,
	registerAudioFileRoute,
	listAudioFilesRoute,
	getAudioFileRoute,
	deleteAudioFileRoute,
	regenerateUploadUrlRoute,
	...webhookRoutes,
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
	handler: ({ env, url }) =>
		Response.json(
			buildOpenApiDocument(apiRoutes, url.origin, [describeConversionTimeLimits(conversionWaitLimitSeconds(env))]),
		),
});

export const routes: RouteDefinition[] = [...apiRoutes, openApiRoute, docsRoute, playgroundDefaultsRoute];
