// The playground talks to the public API exactly as any client would: token, voices, upload, conversion, polling.
import { isVoiceArchive, readVoiceArchive, voiceArchiveChoices } from "./voice-archive.js";
import { voiceFileProblems, voiceFileSizeProblems } from "./voice-file-kinds.js";

const $ = (id) => document.getElementById(id);
const state = { token: null, voice: null, resultUrl: null, resumed: false, waveform: null, following: new Set() };

/** What each conversion status means to someone watching (the spec's state machine). */
const STATUS_TEXT = {
	pending_preprocessing: "checking the uploaded audio",
	queued: "waiting for a runner",
	processing: "converting",
};

function showError(message) {
	$("error").textContent = message || "";
}

/**
 * The form control each field the API names comes from, by form (a field under one, `files.model.size_bytes`, goes
 * to it). A field with no control here is listed under the error instead.
 */
const FIELD_CONTROLS = {
	"own-voice-form": {
		name: "own-voice-name",
		"files.model": "own-voice-model",
		"files.index": "own-voice-index",
		"files.image": "own-voice-image",
		"files.sample": "own-voice-sample",
	},
	"convert-form": {
		file: "file",
		pitch_shift: "pitch",
		use_preview: "preview",
		"voice_settings.index_rate": "index_rate",
		"voice_settings.protect": "protect",
		"voice_settings.rms_mix_rate": "rms_mix_rate",
		"voice_settings.formant_shift": "formant_shift",
		"voice_settings.f0_method": "f0_method",
	},
};

function controlFor(formId, field) {
	const controls = FIELD_CONTROLS[formId];
	for (let path = String(field); path; path = path.includes(".") ? path.slice(0, path.lastIndexOf(".")) : "") {
		if (Object.hasOwn(controls, path)) return $(controls[path]);
	}
	return null;
}

/** Takes a field's problem away (the field was changed, or the form is sent again). */
function clearFieldProblem(control) {
	const problem = $(`${control.id}-problem`);
	if (!problem) return;
	problem.remove();
	control.removeAttribute("aria-invalid");
	const rest = (control.getAttribute("aria-describedby") ?? "").split(" ").filter((id) => id && id !== problem.id);
	if (rest.length > 0) control.setAttribute("aria-describedby", rest.join(" "));
	else control.removeAttribute("aria-describedby");
}

function clearFieldProblems(formId) {
	for (const control of Object.values(FIELD_CONTROLS[formId]).map($)) clearFieldProblem(control);
}

/**
 * Shows why a form was refused: the error's message, each field's problem under the control it came from (marked
 * invalid, and read with it as its description), and the problems of fields without a control listed under the
 * message. `error.fieldErrors` is the API's `errors` ([{ field, message }]), or the page's own in the same shape.
 */
function showFailure(formId, error) {
	clearFieldProblems(formId);
	const placed = new Map();
	const listed = [];
	for (const { field, message } of error.fieldErrors ?? []) {
		const control = controlFor(formId, field);
		if (control) placed.set(control, [...(placed.get(control) ?? []), message]);
		else listed.push(`${field}: ${message}`);
	}
	for (const [control, messages] of placed) {
		const problem = document.createElement("span");
		problem.id = `${control.id}-problem`;
		problem.className = "field-problem error";
		problem.textContent = messages.join("; ");
		// Inside the label, under the control; hidden from the label's name (it is the control's description).
		problem.setAttribute("aria-hidden", "true");
		control.after(problem);
		control.setAttribute("aria-invalid", "true");
		control.setAttribute(
			"aria-describedby",
			[control.getAttribute("aria-describedby"), problem.id].filter(Boolean).join(" "),
		);
		control.addEventListener("input", () => clearFieldProblem(control), { once: true });
		const details = control.closest("details");
		if (details) details.open = true;
	}
	// The top message already says the first field's problem: it is not listed twice.
	showError([error.message, ...listed.filter((line) => !error.message.includes(line))].join("\n"));
}

function showStatus(status, startedAt) {
	const seconds = `${((Date.now() - startedAt) / 1000).toFixed(1)} s`;
	const text = {
		completed: `completed in ${seconds}`,
		failed: `failed after ${seconds}`,
	}[status];
	$("status").textContent = `Status: ${text ?? `${status} — ${STATUS_TEXT[status] ?? "…"} (${seconds})`}`;
}

/**
 * A refusal fit to show: the API's `message`, else the HTTP status, never a stack trace; with its `status` and the
 * envelope's field problems (`errors`: [{ field, message }]) as `fieldErrors`.
 */
async function failure(response, what) {
	const body = await response.json().catch(() => ({}));
	const error = new Error(body.message || `${what} failed (${response.status} ${response.statusText})`);
	error.status = response.status;
	error.fieldErrors = fieldErrorsOf(body);
	return error;
}

/** The envelope's `errors`, each a field and a message; anything else in it is left out. */
const fieldErrorsOf = (body) =>
	Array.isArray(body?.errors)
		? body.errors.filter((e) => typeof e?.field === "string" && typeof e?.message === "string")
		: [];

/** The request never got an answer (offline, connection dropped): worth trying again, unlike a refusal. */
class NetworkError extends Error {}

/** fetch, with "Failed to fetch" told as what it is. */
async function send(path, init, what) {
	try {
		return await fetch(path, init);
	} catch {
		throw new NetworkError(`${what}: no answer from the service (network error). Check the connection and try again.`);
	}
}

async function api(path, init = {}, renewed = false) {
	const response = await send(
		path,
		{
			...init,
			headers: {
				Authorization: `Bearer ${state.token}`,
				...(init.body ? { "Content-Type": "application/json" } : {}),
				...init.headers,
			},
		},
		`${init.method || "GET"} ${path}`,
	);
	if (response.status === 401 && !renewed) {
		// A token lasts an hour, and a session or a long conversion can outlast it: get a new one with the
		// credentials still in the form and try once more (nothing was done with the refused token).
		state.token = await requestToken();
		return api(path, init, true);
	}
	if (!response.ok) throw await failure(response, `${init.method || "GET"} ${path}`);
	return (await response.json()).data;
}

/** An access token for the credentials in the form; the token endpoint is the only place they are sent. */
async function requestToken() {
	const response = await send(
		"/oauth2/token",
		{
			method: "POST",
			headers: { "Content-Type": "application/x-www-form-urlencoded" },
			body: new URLSearchParams({
				grant_type: "client_credentials",
				client_id: $("client-id").value.trim(),
				client_secret: $("client-secret").value.trim(),
				scope: "voice-conversion-api/base",
			}),
		},
		"Token request",
	);
	if (!response.ok) throw await failure(response, "Token request");
	return (await response.json()).access_token;
}

async function signIn(event) {
	event.preventDefault();
	showError("");
	$("sign-in").disabled = true;
	$("token-status").textContent = "Requesting token…";
	try {
		state.token = await requestToken();
		$("token-status").textContent = "Signed in ✓";
		await loadVoices();
		$("own-voices-step").hidden = false;
		void resumeFromAddress();
	} catch (error) {
		$("token-status").textContent = "";
		showError(error.message);
	} finally {
		$("sign-in").disabled = false;
	}
}

/**
 * Lists the voices (again: after a sign-in, and when one of your own is created, ready or deleted). The voice picked
 * for conversion stays picked, and the conversion step open, while it is still listed ready: a voice of your own that
 * becomes ready must not take away the pick of one being converted with.
 */
async function loadVoices() {
	const voices = await api("/api/v1/voices");
	const container = $("voices");
	container.replaceChildren();
	const picked = state.voice?.id;
	state.voice = null;
	$("no-voices").hidden = voices.length > 0;
	const own = voices.filter((voice) => voice.owner === "account");
	showOwnVoices(own);
	// A voice still being checked (uploaded before a reload, or from another client) is followed to its end too.
	for (const voice of own.filter((v) => v.status === "validating" && !state.following.has(v.id))) {
		followValidation(voice).catch((error) => showError(error.message));
	}
	for (const voice of voices.filter((v) => v.status === "ready")) {
		// A real radio button in a label: arrow keys move between voices, and the sample's player stays outside
		// the label, reachable and named on its own (a role="radio" element would hide its children's controls).
		const card = document.createElement("div");
		card.className = "voice";
		card.dataset.voiceId = voice.id;
		const label = document.createElement("label");
		const radio = document.createElement("input");
		radio.type = "radio";
		radio.name = "voice";
		radio.value = voice.id;
		if (voice.image_url) {
			const img = document.createElement("img");
			img.src = voice.image_url;
			img.alt = `Portrait of ${voice.name}`;
			label.append(img);
		}
		const name = document.createElement("strong");
		name.textContent = voice.name;
		const tags = document.createElement("span");
		tags.className = "tags";
		tags.textContent = [voice.owner === "account" ? "yours" : null, ...voice.tags].filter(Boolean).join(" · ");
		const title = document.createElement("span");
		title.className = "voice-name";
		title.append(radio, " ", name);
		label.append(title, tags);
		card.append(label);
		if (voice.song_url) {
			const audio = document.createElement("audio");
			audio.controls = true;
			audio.preload = "none";
			audio.src = voice.song_url;
			audio.setAttribute("aria-label", `Sample of ${voice.name}`);
			card.append(audio);
		}
		radio.addEventListener("change", () => {
			state.voice = voice;
			$("convert-step").hidden = false;
		});
		if (voice.id === picked) {
			radio.checked = true;
			state.voice = voice;
		}
		container.append(card);
	}
	$("convert-step").hidden = !state.voice;
	$("voices-step").hidden = false;
}

function showUploadProgress(loaded, total) {
	const percent = total ? Math.round((loaded / total) * 100) : 0;
	$("upload-progress").value = percent;
	$("upload-label").textContent = `${percent}% of ${(total / 1e6).toFixed(1)} MB`;
}

/** PUT with XMLHttpRequest: fetch has no upload progress events. Resolves with the response text. */
function upload(url, file, contentType, onProgress = showUploadProgress) {
	return new Promise((resolve, reject) => {
		const xhr = new XMLHttpRequest();
		xhr.open("PUT", url);
		if (contentType) xhr.setRequestHeader("Content-Type", contentType);
		xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : file.size);
		xhr.onload = () => {
			if (xhr.status !== 200) {
				let body = {};
				try {
					body = JSON.parse(xhr.responseText);
				} catch {}
				const error = new Error(body?.message || `Upload failed (${xhr.status})`);
				error.status = xhr.status;
				error.fieldErrors = fieldErrorsOf(body);
				return reject(error);
			}
			// A small body may finish before any progress event reports its end.
			onProgress(file.size, file.size);
			resolve(xhr.responseText);
		};
		xhr.onerror = () => reject(new NetworkError("Upload failed: network error"));
		onProgress(0, file.size);
		xhr.send(file);
	});
}

function mimeTypeOf(file) {
	if (file.type) return file.type === "audio/x-wav" || file.type === "audio/wave" ? "audio/wav" : file.type;
	const extension = file.name.split(".").pop().toLowerCase();
	return { wav: "audio/wav", mp3: "audio/mpeg", flac: "audio/flac" }[extension] || "application/octet-stream";
}

/** The API takes sources under 100 MB (it refuses an upload of this many bytes or more). */
const MAX_SOURCE_BYTES = 100_000_000;
/** The API's words for an upload of a source that large (413 from its upload address). */
const SOURCE_TOO_LARGE = `Uploads must be smaller than ${MAX_SOURCE_BYTES} bytes`;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The filled-in voice settings, as the API's `voice_settings` (undefined when none is filled in). */
function voiceSettings() {
	const settings = {};
	for (const name of ["index_rate", "protect", "rms_mix_rate", "formant_shift"]) {
		const raw = $(name).value.trim();
		if (raw !== "") settings[name] = Number(raw);
	}
	if ($("f0_method").value) settings.f0_method = $("f0_method").value;
	return Object.keys(settings).length > 0 ? settings : undefined;
}

async function convert(event) {
	event.preventDefault();
	showError("");
	clearFieldProblems("convert-form");
	const file = $("file").files[0];
	if (!file || !state.voice) return;
	if (file.size >= MAX_SOURCE_BYTES) {
		// Refused here, before registering it or sending any of it: the upload address would refuse it anyway, in the
		// words shown beside the file.
		$("status").textContent = "";
		showFailure("convert-form", {
			message: `${file.name} is ${(file.size / 1e6).toFixed(1)} MB: recordings must be under 100 MB (${MAX_SOURCE_BYTES} bytes). Convert a shorter or more compressed file (MP3 or FLAC).`,
			fieldErrors: [{ field: "file", message: SOURCE_TOO_LARGE }],
		});
		return;
	}
	$("convert").disabled = true;
	$("result-step").hidden = true;
	$("upload-progress").value = 0;
	$("upload-label").textContent = "";
	try {
		const mimeType = mimeTypeOf(file);
		$("status").textContent = "Registering the upload…";
		const audioFile = await api("/api/v1/audio-files", {
			method: "POST",
			body: JSON.stringify({ file_name: file.name, mime_type: mimeType }),
		});
		$("status").textContent = "Uploading…";
		await upload(audioFile.upload_url, file, mimeType);
		const conversion = await api("/api/v1/voice-conversions", {
			method: "POST",
			body: JSON.stringify({
				audio_file_id: audioFile.id,
				voice_model_id: state.voice.id,
				pitch_shift: $("pitch").value,
				use_preview: $("preview").checked,
				voice_settings: voiceSettings(),
			}),
		});
		await follow(conversion, file.name, state.voice.name);
	} catch (error) {
		// A step's "Registering…" or "Uploading…" must not stay up as if it were still under way.
		if (!$("status").textContent.startsWith("Status:")) $("status").textContent = "";
		showFailure("convert-form", error);
	} finally {
		$("convert").disabled = false;
	}
}

/**
 * Follows a conversion until it ends, then shows its result. Its id goes into the page's address (never the
 * credentials), so that a reload finds it again once signed in.
 */
async function follow(conversion, sourceName, voiceName) {
	history.replaceState(null, "", `#conversion=${conversion.id}`);
	const startedAt = Date.now();
	let current = conversion;
	// Short first waits so that fast conversions show each step; then back off to spare the API.
	for (let delay = 250; current.status !== "completed" && current.status !== "failed"; ) {
		showStatus(current.status, startedAt);
		await sleep(delay);
		delay = Math.min(delay * 1.5, 2000);
		try {
			current = await api(`/api/v1/voice-conversions/${conversion.id}`);
		} catch (error) {
			// The conversion goes on without the page: a dropped connection only delays the next look at it.
			if (!(error instanceof NetworkError)) throw error;
			showStatus(current.status, startedAt);
			$("status").textContent += " — connection lost, trying again…";
			await sleep(2000);
		}
	}
	showStatus(current.status, startedAt);
	if (current.status === "failed") throw new Error(`Conversion failed: ${current.error_message}`);
	await showResult(current, downloadName(sourceName, voiceName, current.pitch_shift_applied));
}

/** After a reload: the conversion named in the address, followed as before (once, at the first sign-in). */
async function resumeFromAddress() {
	const id = /^#conversion=([0-9a-f-]{36})$/i.exec(window.location.hash)?.[1];
	if (!id || state.resumed) return;
	state.resumed = true;
	$("convert-step").hidden = false;
	$("convert").disabled = true;
	try {
		$("status").textContent = "Finding the conversion the page was following…";
		const conversion = await api(`/api/v1/voice-conversions/${id}`);
		document.querySelector(`.voice[data-voice-id="${conversion.voice_model_id}"] input[type="radio"]`)?.click();
		const [source, voice] = await Promise.all([
			api(`/api/v1/audio-files/${conversion.audio_file_id}`).catch(() => null),
			api(`/api/v1/voices/${conversion.voice_model_id}`).catch(() => null),
		]);
		await follow(conversion, source?.file_name ?? "recording", voice?.name ?? "voice");
	} catch (error) {
		if (!$("status").textContent.startsWith("Status:")) $("status").textContent = "";
		showError(error.message);
	} finally {
		$("convert").disabled = false;
	}
}

function downloadName(sourceName, voiceName, pitch) {
	const stem = sourceName.replace(/\.[^.]*$/, "") || "recording";
	return `${stem}-${voiceName}-${pitch}.wav`.replace(/[^\w.-]+/g, "_");
}

/** Sample rate and channel count from a WAV's `fmt ` chunk (decodeAudioData resamples, so it cannot tell). */
function wavFormat(bytes) {
	const view = new DataView(bytes);
	const id = (at) => String.fromCharCode(...new Uint8Array(bytes, at, 4));
	let at = 12;
	while (at + 8 <= bytes.byteLength) {
		const size = view.getUint32(at + 4, true);
		if (id(at) === "fmt ")
			return { channels: view.getUint16(at + 10, true), sampleRate: view.getUint32(at + 12, true) };
		at += 8 + size + (size % 2);
	}
	return null;
}

async function showResult(conversion, fileName) {
	const response = await send(conversion.output_url, {}, "Downloading the result");
	if (!response.ok) throw await failure(response, "Downloading the result");
	const bytes = await response.arrayBuffer();
	if (state.resultUrl) URL.revokeObjectURL(state.resultUrl);
	state.resultUrl = URL.createObjectURL(new Blob([bytes], { type: "audio/wav" }));
	$("result-audio").src = state.resultUrl;
	$("download").href = state.resultUrl;
	$("download").download = fileName;
	// An offline context decodes without an audio device and without the autoplay policy's user-gesture rule.
	const audio = await new OfflineAudioContext(1, 1, 44_100).decodeAudioData(bytes.slice(0));
	const format = wavFormat(bytes);
	$("result-info").textContent = [
		`pitch ${conversion.pitch_shift === "auto" ? `auto → ${conversion.pitch_shift_applied}` : conversion.pitch_shift}`,
		`${audio.duration.toFixed(2)} s`,
		format && `${format.sampleRate} Hz`,
		format && `${format.channels} ch`,
		`${(bytes.byteLength / 1e6).toFixed(1)} MB`,
	]
		.filter(Boolean)
		.join(" · ");
	$("result-step").hidden = false;
	drawWaveform(audio.getChannelData(0));
}

// The waveform is drawn in device pixels at the canvas's displayed size, so it is drawn again when that changes (a
// window resized or turned, a zoom) rather than stretched. One redraw per frame, however many changes arrive.
let waveformRedraw = 0;
new ResizeObserver(() => {
	if (!state.waveform || waveformRedraw) return;
	waveformRedraw = requestAnimationFrame(() => {
		waveformRedraw = 0;
		if (state.waveform) drawWaveform(state.waveform);
	});
}).observe($("waveform"));

function drawWaveform(samples) {
	state.waveform = samples;
	const canvas = $("waveform");
	// Draw at the canvas's displayed size in device pixels, so the waveform is sharp rather than stretched.
	const scale = window.devicePixelRatio || 1;
	canvas.width = Math.max(1, Math.round(canvas.clientWidth * scale));
	canvas.height = Math.max(1, Math.round(canvas.clientHeight * scale));
	const ctx = canvas.getContext("2d");
	const { width, height } = canvas;
	ctx.clearRect(0, 0, width, height);
	ctx.fillStyle = getComputedStyle(canvas).getPropertyValue("--accent").trim() || "#3b5bdb";
	const step = samples.length / width;
	for (let x = 0; x < width; x++) {
		let min = 1;
		let max = -1;
		const end = Math.min(samples.length, Math.floor((x + 1) * step));
		for (let i = Math.floor(x * step); i < end; i++) {
			min = Math.min(min, samples[i]);
			max = Math.max(max, samples[i]);
		}
		if (max < min) continue;
		const top = ((1 - max) / 2) * height;
		ctx.fillRect(x, top, 1, Math.max(1, ((max - min) / 2) * height));
	}
	canvas.dataset.drawn = "true";
}

const OWN_VOICE_ROLES = ["model", "index", "image", "sample"];
const VOICE_STATUS_TEXT = {
	awaiting_upload: "waiting for its files",
	validating: "being checked by a runner",
	ready: "ready",
	failed: "failed",
};

/** The "Your voices" list: each voice with its status, why it failed, and buttons to use or delete it. */
function showOwnVoices(voices) {
	const list = $("own-voices");
	list.replaceChildren();
	for (const voice of voices) {
		const item = document.createElement("li");
		item.dataset.voiceId = voice.id;
		const name = document.createElement("strong");
		name.textContent = voice.name;
		const status = document.createElement("span");
		status.className = `voice-status ${voice.status}`;
		status.textContent = VOICE_STATUS_TEXT[voice.status] ?? voice.status;
		item.append(name, " ", status);
		if (voice.error_message) {
			const reason = document.createElement("div");
			reason.className = "error";
			reason.textContent = voice.error_message;
			item.append(reason);
		}
		if (voice.status === "ready") {
			const use = button("Use in a conversion", () => {
				const radio = document.querySelector(`.voice[data-voice-id="${voice.id}"] input[type="radio"]`);
				radio?.click();
				radio?.focus();
			});
			item.append(" ", use);
		}
		item.append(" ", deleteControls(voice));
		list.append(item);
	}
}

/** A plain button (not a form submit) that calls `onClick`. */
function button(text, onClick) {
	const element = document.createElement("button");
	element.type = "button";
	element.textContent = text;
	element.addEventListener("click", onClick);
	return element;
}

/**
 * "Delete", asking again in place before anything is deleted: a deleted voice cannot be brought back, and its files
 * would have to be uploaded and validated again.
 */
function deleteControls(voice) {
	const controls = document.createElement("span");
	const ask = button("Delete", () => {
		const question = document.createElement("span");
		question.textContent = `Delete "${voice.name}" for good? `;
		const keep = button("Keep it", () => {
			controls.replaceChildren(ask);
			ask.focus();
		});
		const confirm = button("Delete for good", async () => {
			showError("");
			confirm.disabled = true;
			try {
				await api(`/api/v1/voices/${voice.id}`, { method: "DELETE" });
				await loadVoices();
			} catch (error) {
				confirm.disabled = false;
				showError(error.message);
			}
		});
		controls.replaceChildren(question, confirm, " ", keep);
		keep.focus();
	});
	controls.append(ask);
	return controls;
}

/** A progress row for one file of the voice being uploaded. */
function fileProgress(role, file) {
	const row = document.createElement("div");
	row.className = "progress-row";
	const label = document.createElement("span");
	label.className = "muted";
	const bar = document.createElement("progress");
	bar.max = 100;
	bar.value = 0;
	bar.id = `own-voice-progress-${role}`;
	bar.setAttribute("aria-label", `Upload of the ${role} file`);
	row.append(`${role} `, bar, " ", label);
	$("own-voice-progress").append(row);
	return (loaded, total) => {
		const percent = total ? Math.round((loaded / total) * 100) : 0;
		bar.value = percent;
		label.textContent = `${percent}% of ${(file.size / 1e6).toFixed(1)} MB (${file.name})`;
	};
}

/** One file as the API planned it: one PUT, or every part then the completing call. */
async function sendVoiceFile(voiceId, role, plan, file, onProgress) {
	if (plan.method === "PUT") return upload(plan.upload_url, file, null, onProgress);
	for (const part of plan.parts) {
		const start = (part.part_number - 1) * plan.part_size_bytes;
		const piece = file.slice(start, start + plan.part_size_bytes);
		await upload(part.upload_url, piece, null, (loaded) => onProgress(start + loaded, file.size));
	}
	await api(`/api/v1/voices/${voiceId}/files/${role}/complete`, { method: "POST" });
}

/** Tries of one voice file: an index of a gigabyte goes up for long enough to meet a dropped connection. */
const VOICE_UPLOAD_TRIES = 4;

/**
 * One file of the voice, sent again from fresh addresses when the connection dropped or its address stopped working
 * (403: expired after 30 minutes, or superseded): parts already received are kept, and only those missing are sent.
 * A refusal of the file itself (its size, its kind) is not tried again.
 */
async function uploadVoiceFile(voiceId, role, plans, file, onProgress) {
	for (let tries = 1; ; tries++) {
		try {
			return await sendVoiceFile(voiceId, role, plans[role], file, onProgress);
		} catch (error) {
			if (!(error instanceof NetworkError || error.status === 403) || tries >= VOICE_UPLOAD_TRIES) throw error;
			const why =
				error instanceof NetworkError ? "the connection dropped" : `its address was refused (${error.message})`;
			$("own-voice-status").textContent = `Uploading the ${role}: ${why}; trying again…`;
			await sleep(1000 * tries);
			let fresh;
			try {
				fresh = await api(`/api/v1/voices/${voiceId}/upload-urls`, { method: "POST" });
			} catch (renewal) {
				// 409: every file is in (the answer to the last try was lost, not the upload).
				if (renewal.status === 409) return;
				if (renewal instanceof NetworkError) continue;
				throw renewal;
			}
			// Fresh addresses replace those of every file still missing (the old ones stop working), so the files after
			// this one use them too. None for this file: it is in, and another is still missing.
			for (const key of Object.keys(plans)) delete plans[key];
			Object.assign(plans, fresh.uploads);
			if (!plans[role]) return;
			$("own-voice-status").textContent = "Uploading…";
		}
	}
}

/**
 * A file of a voice this page just registered was refused or did not arrive. The page has no way to upload to
 * that voice again, so it deletes it (its name would otherwise be taken by a voice waiting for files forever);
 * the message says what became of it.
 */
async function abandonVoice(voice, reason) {
	const removed = await api(`/api/v1/voices/${voice.id}`, { method: "DELETE" }).then(
		() => true,
		() => false,
	);
	await loadVoices().catch(() => {});
	return removed
		? `${reason}\nThe voice "${voice.name}" was not kept: pick the right files and upload it again.`
		: `${reason}\nThe voice "${voice.name}" is waiting for its files: delete it under "Your voices" before uploading it again.`;
}

/** The value of the "No index" choice (an entry's path is never empty, and this is no path). */
const NO_INDEX = "\u0000none";
/** Counts the model files picked, so that the choices of an archive picked before do not land after a newer pick's. */
let archivePicks = 0;

/** A <select>'s options: a prompt to choose, then each entry by its path. */
function fillChoices(select, entries, extra = []) {
	select.replaceChildren(
		new Option("Choose one…", ""),
		...entries.map((entry) => new Option(entry, entry)),
		...extra.map(([text, value]) => new Option(text, value)),
	);
}

/**
 * A model file was picked. When it is a voice's archive, its directory is read at once: what it holds is said under
 * the form, a choice is offered where it holds several models or indexes, and one the page cannot read is refused
 * before anything is registered.
 */
async function modelPicked() {
	const pick = ++archivePicks;
	const file = $("own-voice-model").files[0];
	$("own-voice-archive-model-choice").hidden = true;
	$("own-voice-archive-index-choice").hidden = true;
	$("own-voice-archive-contents").textContent = "";
	showError("");
	if (!file || !(await isVoiceArchive(file))) return;
	try {
		const choices = await voiceArchiveChoices(file);
		if (pick !== archivePicks) return;
		fillChoices($("own-voice-archive-model"), choices.models);
		fillChoices($("own-voice-archive-index"), choices.indexes, [["No index", NO_INDEX]]);
		$("own-voice-archive-model-choice").hidden = choices.models.length < 2;
		$("own-voice-archive-index-choice").hidden = choices.indexes.length < 2;
		const said = (entries, what, plural) =>
			entries.length === 1 ? `${what} ${entries[0]}` : entries.length ? `several ${plural} (choose one above)` : null;
		const parts = [
			said(choices.models, "model", "models") ?? "no model (.pth or .onnx)",
			said(choices.indexes, "index", "indexes") ?? "no index",
		];
		$("own-voice-archive-contents").textContent = `${file.name} is a voice archive: ${parts.join(", ")}.`;
	} catch (error) {
		if (pick !== archivePicks) return;
		showError(error.message);
	}
}

/**
 * The files to upload, by role, as picked. A voice's archive given as the model gives the model and, unless an index
 * file was picked beside it, its index; what it used and left out is said under the form.
 */
async function ownVoiceFiles() {
	const files = {};
	for (const role of OWN_VOICE_ROLES) {
		const file = $(`own-voice-${role}`).files[0];
		if (file) files[role] = file;
	}
	if (!files.model || !(await isVoiceArchive(files.model))) return files;
	const zip = files.model;
	const modelChoice = $("own-voice-archive-model-choice").hidden ? "" : $("own-voice-archive-model").value;
	const indexChoice = $("own-voice-archive-index-choice").hidden ? "" : $("own-voice-archive-index").value;
	$("own-voice-status").textContent = `Reading ${zip.name}…`;
	let archive;
	try {
		archive = await readVoiceArchive(zip, {
			...(modelChoice ? { model: modelChoice } : {}),
			...(files.index
				? { index: false }
				: indexChoice
					? { index: indexChoice === NO_INDEX ? false : indexChoice }
					: {}),
		});
	} catch (error) {
		// The reader's words are the SDK's ("name the one to use"); here one is named by choosing it.
		const choose = / name the one to use$/.test(error.message) ? "\nChoose it in the list beside the file." : "";
		throw new Error(`${error.message}${choose}`);
	}
	files.model = new File([archive.model.source], archive.model.fileName);
	if (archive.index) files.index = new File([archive.index.source], archive.index.fileName);
	const used = [
		`model ${archive.model.entry}`,
		archive.index
			? `index ${archive.index.entry}`
			: files.index
				? `index ${files.index.name} (picked beside it)`
				: null,
	].filter(Boolean);
	const left = archive.skipped.map((s) => `${s.entry} (${s.reason})`);
	$("own-voice-archive-contents").textContent =
		`From ${zip.name}: ${used.join(", ")}${left.length ? `; left out ${left.join(", ")}` : ""}.`;
	return files;
}

/**
 * Follows one of your voices until its validation ends, then lists the voices again and says how it ended (ready, or
 * failed with the API's `error_message`). Ends quietly when the voice was deleted meanwhile. One follower a voice:
 * the page follows a voice it uploaded, and any it finds validating when it lists them (after a reload, say).
 */
async function followValidation(voice, { uploadedHere = false } = {}) {
	if (state.following.has(voice.id)) return;
	state.following.add(voice.id);
	try {
		let current = { ...voice, status: "validating" };
		if (uploadedHere) await loadVoices().catch(() => {});
		for (let first = true; first || current.status === "validating" || current.status === "awaiting_upload"; ) {
			if (!first) await sleep(1000);
			first = false;
			try {
				current = await api(`/api/v1/voices/${voice.id}`);
				// The status line is the upload's: a voice found validating says only how it ended (its list entry
				// says meanwhile), so that it does not talk over an upload under way.
				if (uploadedHere && (current.status === "validating" || current.status === "awaiting_upload")) {
					$("own-voice-status").textContent = `Voice "${current.name}": ${VOICE_STATUS_TEXT[current.status]}…`;
				}
			} catch (error) {
				if (error.status === 404) {
					if (uploadedHere) $("own-voice-status").textContent = "";
					return;
				}
				// The runner checks the voice without the page: a dropped connection only delays the next look.
				if (!(error instanceof NetworkError)) throw error;
				if (uploadedHere) {
					$("own-voice-status").textContent = `Voice "${current.name}": connection lost, trying again…`;
				}
			}
		}
		// The list first, so that it shows the voice as the message says when the message appears.
		await loadVoices();
		$("own-voice-status").textContent =
			current.status === "ready"
				? `Voice "${current.name}" is ready: pick it above to convert with it.`
				: `Voice "${current.name}" failed: ${current.error_message}`;
	} finally {
		state.following.delete(voice.id);
	}
}

async function createOwnVoice(event) {
	event.preventDefault();
	showError("");
	clearFieldProblems("own-voice-form");
	$("own-voice-create").disabled = true;
	$("own-voice-progress").replaceChildren();
	let voice = null;
	let uploaded = false;
	try {
		// An archive the page cannot use, a file larger than its role takes (as the API would refuse to register it),
		// and a file that is not what its role takes (by its first bytes, as the SDK checks), are refused here, before
		// the voice is registered. The API checks each file again when it is registered and uploaded.
		const files = await ownVoiceFiles();
		const refused = [...voiceFileSizeProblems(files), ...(await voiceFileProblems(files))];
		if (refused.length > 0) {
			const error = new Error(
				`${refused.map((problem) => problem.message).join("\n")}\nNothing was registered: pick the right file and upload the voice again.`,
			);
			error.fieldErrors = refused.map((problem) => problem.field);
			throw error;
		}
		$("own-voice-status").textContent = "Registering the voice…";
		voice = await api("/api/v1/voices", {
			method: "POST",
			body: JSON.stringify({
				name: $("own-voice-name").value.trim(),
				files: Object.fromEntries(
					Object.entries(files).map(([role, file]) => [role, { file_name: file.name, size_bytes: file.size }]),
				),
			}),
		});
		$("own-voice-status").textContent = "Uploading…";
		const plans = { ...voice.uploads };
		for (const [role, file] of Object.entries(files)) {
			await uploadVoiceFile(voice.id, role, plans, file, fileProgress(role, file));
		}
		uploaded = true;
		await followValidation(voice, { uploadedHere: true });
	} catch (error) {
		$("own-voice-status").textContent = "";
		const message = voice && !uploaded ? await abandonVoice(voice, error.message) : error.message;
		showFailure("own-voice-form", Object.assign(new Error(message), { fieldErrors: error.fieldErrors }));
	} finally {
		$("own-voice-create").disabled = false;
	}
}

async function prefill() {
	// Local development only: the Worker offers the demo client's credentials when it was started with them,
	// and answers 404 everywhere else (a 404 here is expected, not an error).
	const response = await fetch("/playground/defaults.json").catch(() => null);
	if (!response?.ok) return;
	const defaults = await response.json();
	if (defaults.client_id) $("client-id").value = defaults.client_id;
	if (defaults.client_secret) $("client-secret").value = defaults.client_secret;
}

$("credentials-form").addEventListener("submit", signIn);
$("convert-form").addEventListener("submit", convert);
$("own-voice-form").addEventListener("submit", createOwnVoice);
$("own-voice-model").addEventListener("change", modelPicked);
prefill();
