/** A FIFO of byte chunks from a stream, read back in exact sizes without joining the whole stream. */
export class ByteQueue {
	#chunks: Uint8Array[] = [];
	#offset = 0; // read position inside the first chunk
	#length = 0;

	get length(): number {
		return this.#length;
	}

	push(chunk: Uint8Array): void {
		if (chunk.length === 0) return;
		this.#chunks.push(chunk);
		this.#length += chunk.length;
	}

	/** Remove and return exactly `n` bytes; the caller checks `length` first. */
	read(n: number): Uint8Array {
		if (n > this.#length) throw new RangeError(`ByteQueue.read(${n}) with only ${this.#length} bytes queued`);
		const out = new Uint8Array(n);
		let written = 0;
		while (written < n) {
			const head = this.#chunks[0] as Uint8Array;
			const take = Math.min(n - written, head.length - this.#offset);
			out.set(head.subarray(this.#offset, this.#offset + take), written);
			written += take;
			this.#offset += take;
			if (this.#offset === head.length) {
				this.#chunks.shift();
				this.#offset = 0;
			}
		}
		this.#length -= n;
		return out;
	}

	/** The next byte without removing it; the caller checks `length` first. */
	peek(): number {
		if (this.#length === 0) throw new RangeError("ByteQueue.peek() with no bytes queued");
		return (this.#chunks[0] as Uint8Array)[this.#offset] as number;
	}

	/** Drop up to `n` bytes; returns how many were dropped. */
	skip(n: number): number {
		let dropped = 0;
		while (dropped < n && this.#chunks.length > 0) {
			const head = this.#chunks[0] as Uint8Array;
			const take = Math.min(n - dropped, head.length - this.#offset);
			dropped += take;
			this.#offset += take;
			if (this.#offset === head.length) {
				this.#chunks.shift();
				this.#offset = 0;
			}
		}
		this.#length -= dropped;
		return dropped;
	}
}
