// The playground talks to the public API exactly as any client would: token, voices, upload, conversion, polling.
const $ = (id) => document.getElementById(id);
const state = { token: null, voiceId: null };

function showError(message) {
	$("error").textContent = message || "";
}

async function api(path, init = {}) {
	const response = await fetch(path, {
		...init,
		headers: {
			Authorization: `Bearer ${state.token}`,
			...(init.body ? { "Content-Type": "application/json" } : {}),
			...init.headers,
		},
	});
	const body = await response.json().catch(() => ({}));
	if (!response.ok) throw new Error(body.message || `${init.method || "GET"} ${path} failed (${response.status})`);
	return body.data;
}

async function signIn(event) {
	event.preventDefault();
	showError("");
	$("token-status").textContent = "Requesting token…";
	const response = await fetch("/oauth2/token", {
		method: "POST",
		headers: { "Content-Type": "application/x-www-form-urlencoded" },
		body: new URLSearchParams({
			grant_type: "client_credentials",
			client_id: $("client-id").value.trim(),
			client_secret: $("client-secret").value.trim(),
			scope: "voice-conversion-api/base",
		}),
	});
	const body = await response.json().catch(() => ({}));
	if (!response.ok) {
		$("token-status").textContent = "";
		return showError(body.message || `Token request failed (${response.status})`);
	}
	state.token = body.access_token;
	$("token-status").textContent = "Signed in ✓";
	await loadVoices();
}

async function loadVoices() {
	const voices = await api("/api/v1/voices");
	const container = $("voices");
	container.replaceChildren();
	for (const voice of voices) {
		const card = document.createElement("div");
		card.className = "voice";
		card.setAttribute("role", "radio");
		card.setAttribute("aria-checked", "false");
		card.tabIndex = 0;
		card.dataset.voiceId = voice.id;
		if (voice.image_url) {
			const img = document.createElement("img");
			img.src = voice.image_url;
			img.alt = `Portrait of ${voice.name}`;
			card.append(img);
		}
		const name = document.createElement("strong");
		name.textContent = voice.name;
		const tags = document.createElement("div");
		tags.className = "tags";
		tags.textContent = voice.tags.join(" · ");
		card.append(name, tags);
		if (voice.song_url) {
			const audio = document.createElement("audio");
			audio.controls = true;
			audio.preload = "none";
			audio.src = voice.song_url;
			card.append(audio);
		}
		const select = () => {
			for (const other of container.children) other.setAttribute("aria-checked", "false");
			card.setAttribute("aria-checked", "true");
			state.voiceId = voice.id;
			$("convert-step").hidden = false;
		};
		card.addEventListener("click", select);
		card.addEventListener("keydown", (e) => (e.key === "Enter" || e.key === " ") && select());
		container.append(card);
	}
	$("voices-step").hidden = false;
}

/** PUT with XMLHttpRequest: fetch has no upload progress events. */
function upload(url, file, contentType) {
	return new Promise((resolve, reject) => {
		const xhr = new XMLHttpRequest();
		xhr.open("PUT", url);
		xhr.setRequestHeader("Content-Type", contentType);
		xhr.upload.onprogress = (e) => {
			if (!e.lengthComputable) return;
			const percent = Math.round((e.loaded / e.total) * 100);
			$("upload-progress").value = percent;
			$("upload-label").textContent = `${percent}% of ${(e.total / 1e6).toFixed(1)} MB`;
		};
		xhr.onload = () => {
			if (xhr.status === 200) return resolve();
			let message = `Upload failed (${xhr.status})`;
			try {
				message = JSON.parse(xhr.responseText).message || message;
			} catch {}
			reject(new Error(message));
		};
		xhr.onerror = () => reject(new Error("Upload failed: network error"));
		xhr.send(file);
	});
}

function mimeTypeOf(file) {
	if (file.type) return file.type === "audio/x-wav" || file.type === "audio/wave" ? "audio/wav" : file.type;
	const extension = file.name.split(".").pop().toLowerCase();
	return { wav: "audio/wav", mp3: "audio/mpeg", flac: "audio/flac" }[extension] || "application/octet-stream";
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function convert(event) {
	event.preventDefault();
	showError("");
	const file = $("file").files[0];
	if (!file || !state.voiceId) return;
	$("convert").disabled = true;
	$("result-step").hidden = true;
	try {
		const mimeType = mimeTypeOf(file);
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
				voice_model_id: state.voiceId,
				pitch_shift: $("pitch").value,
				use_preview: $("preview").checked,
			}),
		});
		let current = conversion;
		for (
			let delay = 500;
			current.status !== "completed" && current.status !== "failed";
			delay = Math.min(delay * 1.5, 4000)
		) {
			$("status").textContent = `Status: ${current.status}`;
			await sleep(delay);
			current = await api(`/api/v1/voice-conversions/${conversion.id}`);
		}
		$("status").textContent = `Status: ${current.status}`;
		if (current.status === "failed") throw new Error(`Conversion failed: ${current.error_message}`);
		await showResult(current.output_url);
	} catch (error) {
		showError(error.message);
	} finally {
		$("convert").disabled = false;
	}
}

async function showResult(url) {
	const bytes = await (await fetch(url)).arrayBuffer();
	const blob = new Blob([bytes], { type: "audio/wav" });
	const objectUrl = URL.createObjectURL(blob);
	$("result-audio").src = objectUrl;
	$("download").href = objectUrl;
	const audio = await new AudioContext().decodeAudioData(bytes.slice(0));
	$("result-info").textContent =
		`${audio.duration.toFixed(2)} s · ${audio.sampleRate} Hz · ${audio.numberOfChannels} ch`;
	drawWaveform(audio.getChannelData(0));
	$("result-step").hidden = false;
}

function drawWaveform(samples) {
	const canvas = $("waveform");
	const ctx = canvas.getContext("2d");
	const { width, height } = canvas;
	ctx.clearRect(0, 0, width, height);
	ctx.fillStyle = getComputedStyle(document.documentElement).getPropertyValue("--accent") || "#3b5bdb";
	const step = Math.max(1, Math.floor(samples.length / width));
	for (let x = 0; x < width; x++) {
		let min = 1;
		let max = -1;
		for (let i = x * step; i < Math.min(samples.length, (x + 1) * step); i++) {
			min = Math.min(min, samples[i]);
			max = Math.max(max, samples[i]);
		}
		const top = ((1 - max) / 2) * height;
		ctx.fillRect(x, top, 1, Math.max(1, ((max - min) / 2) * height));
	}
	canvas.dataset.drawn = "true";
}

async function prefill() {
	// Local development only: the Worker offers the demo client's credentials when it was started with them.
	const response = await fetch("/playground/defaults.json").catch(() => null);
	if (!response?.ok) return;
	const defaults = await response.json();
	if (defaults.client_id) $("client-id").value = defaults.client_id;
	if (defaults.client_secret) $("client-secret").value = defaults.client_secret;
}

$("credentials-form").addEventListener("submit", (e) => signIn(e).catch((err) => showError(err.message)));
$("convert-form").addEventListener("submit", convert);
prefill();
