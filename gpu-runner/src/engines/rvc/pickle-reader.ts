/**
 * A strict reader of Python pickles (trust boundary: the bytes come from whoever uploaded a voice). It runs
 * only the opcodes that build plain data — dicts, lists, tuples, strings, numbers — plus the few that name and
 * call globals, and those only for names in the caller's allow-list, which decides what each name becomes.
 * Nothing is imported or executed: an unknown global (`os.system`, `builtins.eval`, any class) or opcode
 * (`INST`, `OBJ`, `NEWOBJ`, extension codes, ...) stops the read with a `PickleError` naming it.
 *
 * Values: dicts are `Map`s, lists are arrays, tuples are `PickleTuple`, `None` is null, ints are numbers
 * (bigint beyond 2^53), floats are numbers.
 */

export type PickleErrorKind = "forbidden_global" | "unsupported_opcode" | "malformed";

export class PickleError extends Error {
	readonly kind: PickleErrorKind;

	constructor(kind: PickleErrorKind, message: string) {
		super(message);
		this.name = "PickleError";
		this.kind = kind;
	}
}

export class PickleTuple {
	readonly items: readonly unknown[];

	constructor(items: readonly unknown[]) {
		this.items = items;
	}
}

/** Nesting levels and characters `quotePickleValue` spells out. */
const QUOTE_DEPTH = 8;
const QUOTE_CHARS = 200;

/**
 * A value read from a pickle as a message may quote it, in at most about 200 characters and 8 levels of nesting
 * whatever the value: a pickle of a few hundred bytes can nest tuples thousands deep, or share one tuple between both
 * items of the next at every level (the memo), so that writing it out in full would take 2^depth items; ints beyond
 * 2^53 are bigints, which `JSON.stringify` refuses. Lists are written as JSON writes them, tuples as Python does,
 * dicts as "a dict"; `custom` may name other values first (a list as "a list").
 */
export function quotePickleValue(value: unknown, custom?: (value: unknown) => string | undefined): string {
	let out = "";
	const write = (text: string): boolean => {
		out += text;
		return out.length <= QUOTE_CHARS;
	};
	const walk = (v: unknown, depth: number): boolean => {
		const named = custom?.(v);
		if (named !== undefined) return write(named);
		if (v instanceof PickleTuple || Array.isArray(v)) {
			const tuple = v instanceof PickleTuple;
			const items: readonly unknown[] = tuple ? v.items : v;
			if (items.length > 0 && depth >= QUOTE_DEPTH) return write(tuple ? "(…)" : "[…]");
			if (!write(tuple ? "(" : "[")) return false;
			for (let i = 0; i < items.length; i++) {
				if (i > 0 && !write(tuple ? ", " : ",")) return false;
				if (!walk(items[i], depth + 1)) return false;
			}
			return write(tuple ? ")" : "]");
		}
		if (v instanceof Map) return write("a dict");
		if (typeof v === "bigint") return write(String(v));
		if (typeof v === "string") return write(JSON.stringify(v.length > QUOTE_CHARS ? v.slice(0, QUOTE_CHARS) : v));
		if (typeof v === "object" && v !== null) return write(v.constructor?.name ?? "an object");
		return write(JSON.stringify(v) ?? String(v));
	};
	return walk(value, 0) ? out : `${out.slice(0, QUOTE_CHARS)}…`;
}

/** What an allowed global becomes: a callable (for REDUCE) or a plain marker value. */
export interface PickleCallable {
	readonly name: string;
	call(args: readonly unknown[]): unknown;
}

export interface PickleReadOptions {
	/** `module.name` -> value for every global the pickle may name; anything else is refused. */
	globals: ReadonlyMap<string, unknown>;
	/** Resolves a BINPERSID id (torch's storage references); pickles without persistent ids need none. */
	persistentLoad?: (id: unknown) => unknown;
}

/** Opcode names (pickletools), so a refusal names what it saw. */
const OPCODE_NAMES: Record<number, string> = {
	40: "MARK",
	46: "STOP",
	48: "POP",
	49: "POP_MARK",
	50: "DUP",
	70: "FLOAT",
	73: "INT",
	74: "BININT",
	75: "BININT1",
	76: "LONG",
	77: "BININT2",
	78: "NONE",
	80: "PERSID",
	81: "BINPERSID",
	82: "REDUCE",
	83: "STRING",
	84: "BINSTRING",
	85: "SHORT_BINSTRING",
	86: "UNICODE",
	88: "BINUNICODE",
	97: "APPEND",
	98: "BUILD",
	99: "GLOBAL",
	100: "DICT",
	125: "EMPTY_DICT",
	101: "APPENDS",
	103: "GET",
	104: "BINGET",
	105: "INST",
	106: "LONG_BINGET",
	108: "LIST",
	93: "EMPTY_LIST",
	111: "OBJ",
	112: "PUT",
	113: "BINPUT",
	114: "LONG_BINPUT",
	115: "SETITEM",
	116: "TUPLE",
	41: "EMPTY_TUPLE",
	117: "SETITEMS",
	71: "BINFLOAT",
	128: "PROTO",
	129: "NEWOBJ",
	130: "EXT1",
	131: "EXT2",
	132: "EXT4",
	133: "TUPLE1",
	134: "TUPLE2",
	135: "TUPLE3",
	136: "NEWTRUE",
	137: "NEWFALSE",
	138: "LONG1",
	139: "LONG4",
	66: "BINBYTES",
	67: "SHORT_BINBYTES",
	140: "SHORT_BINUNICODE",
	141: "BINUNICODE8",
	142: "BINBYTES8",
	143: "EMPTY_SET",
	144: "ADDITEMS",
	145: "FROZENSET",
	146: "NEWOBJ_EX",
	147: "STACK_GLOBAL",
	148: "MEMOIZE",
	149: "FRAME",
	150: "BYTEARRAY8",
	151: "NEXT_BUFFER",
	152: "READONLY_BUFFER",
};

const MARK = Symbol("mark");

export function readPickle(bytes: Uint8Array, options: PickleReadOptions): unknown {
	const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
	const decoder = new TextDecoder("utf-8", { fatal: true });
	const stack: unknown[] = [];
	const memo = new Map<number, unknown>();
	let at = 0;

	const need = (n: number): number => {
		if (at + n > bytes.length) throw new PickleError("malformed", `pickle ends inside an opcode at byte ${at}`);
		const start = at;
		at += n;
		return start;
	};
	const pop = (): unknown => {
		if (stack.length === 0) throw new PickleError("malformed", `pickle pops an empty stack at byte ${at}`);
		const value = stack.pop();
		if (value === MARK) throw new PickleError("malformed", `pickle pops a MARK as a value at byte ${at}`);
		return value;
	};
	const top = (): unknown => {
		const value = stack[stack.length - 1];
		if (stack.length === 0 || value === MARK)
			throw new PickleError("malformed", `pickle has no object on the stack at byte ${at}`);
		return value;
	};
	const popMark = (): unknown[] => {
		const mark = stack.lastIndexOf(MARK);
		if (mark < 0) throw new PickleError("malformed", `pickle has no MARK at byte ${at}`);
		const items = stack.splice(mark);
		items.shift();
		return items;
	};
	const text = (n: number): string => {
		const start = need(n);
		try {
			return decoder.decode(bytes.subarray(start, start + n));
		} catch {
			throw new PickleError("malformed", `pickle string at byte ${start} is not UTF-8`);
		}
	};
	const global = (module: string, name: string): unknown => {
		const qualified = `${module}.${name}`;
		if (!options.globals.has(qualified)) {
			throw new PickleError(
				"forbidden_global",
				`pickle imports ${qualified}, which is not allowed (allowed: ${[...options.globals.keys()].join(", ")})`,
			);
		}
		return options.globals.get(qualified);
	};
	const setItems = (target: unknown, items: unknown[]): void => {
		if (!(target instanceof Map)) throw new PickleError("malformed", `pickle sets items on a non-dict at byte ${at}`);
		if (items.length % 2 !== 0)
			throw new PickleError("malformed", `pickle SETITEMS has an odd item count at byte ${at}`);
		for (let i = 0; i < items.length; i += 2) target.set(items[i], items[i + 1]);
	};
	const append = (target: unknown, items: unknown[]): void => {
		if (!Array.isArray(target)) throw new PickleError("malformed", `pickle appends to a non-list at byte ${at}`);
		// One at a time: spread as arguments, a long APPENDS (a million items is 1 MB of pickle) overflows the stack.
		for (const item of items) target.push(item);
	};
	const memoGet = (key: number): unknown => {
		if (!memo.has(key)) throw new PickleError("malformed", `pickle reads memo ${key} before writing it`);
		return memo.get(key);
	};

	for (;;) {
		const opcodeAt = need(1);
		const opcode = bytes[opcodeAt] as number;
		switch (opcode) {
			case 0x80: // PROTO
				if ((bytes[need(1)] as number) > 5) throw new PickleError("malformed", "pickle protocol above 5");
				break;
			case 0x95: // FRAME: a length prefix only (protocol 4)
				need(8);
				break;
			case 0x2e: // STOP
				if (stack.length !== 1)
					throw new PickleError("malformed", `pickle stops with ${stack.length} values on the stack`);
				return pop();
			case 0x28: // MARK
				stack.push(MARK);
				break;
			case 0x7d: // EMPTY_DICT
				stack.push(new Map());
				break;
			case 0x5d: // EMPTY_LIST
				stack.push([]);
				break;
			case 0x29: // EMPTY_TUPLE
				stack.push(new PickleTuple([]));
				break;
			case 0x74: // TUPLE
				stack.push(new PickleTuple(popMark()));
				break;
			case 0x85: // TUPLE1
				stack.push(new PickleTuple([pop()]));
				break;
			case 0x86: {
				// TUPLE2
				const b = pop();
				stack.push(new PickleTuple([pop(), b]));
				break;
			}
			case 0x87: {
				// TUPLE3
				const c = pop();
				const b = pop();
				stack.push(new PickleTuple([pop(), b, c]));
				break;
			}
			case 0x4e: // NONE
				stack.push(null);
				break;
			case 0x88: // NEWTRUE
				stack.push(true);
				break;
			case 0x89: // NEWFALSE
				stack.push(false);
				break;
			case 0x4a: // BININT
				stack.push(view.getInt32(need(4), true));
				break;
			case 0x4b: // BININT1
				stack.push(bytes[need(1)]);
				break;
			case 0x4d: // BININT2
				stack.push(view.getUint16(need(2), true));
				break;
			case 0x8a: {
				// LONG1: little-endian two's complement of n bytes
				const n = bytes[need(1)] as number;
				const start = need(n);
				let value = 0n;
				for (let i = n - 1; i >= 0; i--) value = (value << 8n) | BigInt(bytes[start + i] as number);
				if (n > 0 && ((bytes[start + n - 1] as number) & 0x80) !== 0) value -= 1n << BigInt(8 * n);
				stack.push(
					value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value,
				);
				break;
			}
			case 0x47: // BINFLOAT: big-endian double
				stack.push(view.getFloat64(need(8), false));
				break;
			case 0x58: // BINUNICODE
				stack.push(text(view.getUint32(need(4), true)));
				break;
			case 0x8c: // SHORT_BINUNICODE
				stack.push(text(bytes[need(1)] as number));
				break;
			case 0x71: // BINPUT
				memo.set(bytes[need(1)] as number, top());
				break;
			case 0x72: // LONG_BINPUT
				memo.set(view.getUint32(need(4), true), top());
				break;
			case 0x94: // MEMOIZE
				memo.set(memo.size, top());
				break;
			case 0x68: // BINGET
				stack.push(memoGet(bytes[need(1)] as number));
				break;
			case 0x6a: // LONG_BINGET
				stack.push(memoGet(view.getUint32(need(4), true)));
				break;
			case 0x73: {
				// SETITEM
				const value = pop();
				const key = pop();
				setItems(top(), [key, value]);
				break;
			}
			case 0x75: {
				// SETITEMS
				const items = popMark();
				setItems(top(), items);
				break;
			}
			case 0x61: {
				// APPEND
				const value = pop();
				append(top(), [value]);
				break;
			}
			case 0x65: {
				// APPENDS
				const items = popMark();
				append(top(), items);
				break;
			}
			case 0x63: {
				// GLOBAL "module\nname\n"
				const readLine = (): string => {
					const end = bytes.indexOf(0x0a, at);
					if (end < 0) throw new PickleError("malformed", "pickle GLOBAL without a newline");
					return text(end - at + 1).slice(0, -1);
				};
				const module = readLine();
				stack.push(global(module, readLine()));
				break;
			}
			case 0x93: {
				// STACK_GLOBAL
				const name = pop();
				const module = pop();
				if (typeof module !== "string" || typeof name !== "string")
					throw new PickleError("malformed", "pickle STACK_GLOBAL with non-string names");
				stack.push(global(module, name));
				break;
			}
			case 0x52: {
				// REDUCE: only allowed callables
				const args = pop();
				const callable = pop();
				if (!(args instanceof PickleTuple))
					throw new PickleError("malformed", "pickle REDUCE without an argument tuple");
				if (typeof callable !== "object" || callable === null || !("call" in callable))
					throw new PickleError("forbidden_global", "pickle calls something that is not an allowed function");
				stack.push((callable as PickleCallable).call(args.items));
				break;
			}
			case 0x62: {
				// BUILD: state for an object; only dicts (OrderedDict's attribute state, e.g. `_metadata`) take it, ignored
				pop();
				if (!(top() instanceof Map)) throw new PickleError("forbidden_global", "pickle sets state on an object");
				break;
			}
			case 0x51: {
				// BINPERSID
				const id = pop();
				if (options.persistentLoad === undefined)
					throw new PickleError("unsupported_opcode", "pickle uses persistent ids (BINPERSID) where none are expected");
				stack.push(options.persistentLoad(id));
				break;
			}
			default:
				throw new PickleError(
					"unsupported_opcode",
					`pickle opcode ${OPCODE_NAMES[opcode] ?? "unknown"} (0x${opcode.toString(16).padStart(2, "0")}) at byte ${opcodeAt} is not allowed`,
				);
		}
	}
}
