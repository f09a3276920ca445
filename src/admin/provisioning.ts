/**
 * Admin operations as data: each returns the SQL to run and what to print. The admin CLI runs the SQL with
 * `wrangler d1 execute` (local or remote); tests run the same SQL through the D1 binding.
 */
import { generateClientSecret, hashClientSecret } from "../auth/client-secrets.ts";
import { BASE_SCOPE, RUNNER_SCOPE } from "../auth/scopes.ts";
import { insertSql, sqlValue, updateSql } from "./sql.ts";

export interface AdminPlan<T> {
	statements: string[];
	output: T;
}

export function createAccount(name: string, now = new Date()): AdminPlan<{ account_id: string; name: string }> {
	if (!name.trim()) throw new Error("Account name must not be empty");
	const id = crypto.randomUUID();
	return {
		statements: [insertSql("accounts", { id, name: name.trim(), created_at: now.toISOString() })],
		output: { account_id: id, name: name.trim() },
	};
}

export async function createClient(
	accountId: string,
	options: { name: string; kind: "api" | "runner" },
	now = new Date(),
): Promise<AdminPlan<{ client_id: string; client_secret: string; account_id: string; scope: string }>> {
	const id = crypto.randomUUID();
	const secret = generateClientSecret();
	const scope = options.kind === "runner" ? RUNNER_SCOPE : BASE_SCOPE;
	return {
		statements: [
			// Fails loudly (no row inserted) when the account does not exist.
			`INSERT INTO api_clients (id, account_id, name, secret_hash, scopes, created_at) SELECT ${sqlValue(id)}, id, ${sqlValue(
				options.name,
			)}, ${sqlValue(await hashClientSecret(secret))}, ${sqlValue(scope)}, ${sqlValue(now.toISOString())} FROM accounts WHERE id = ${sqlValue(accountId)};`,
		],
		output: { client_id: id, client_secret: secret, account_id: accountId, scope },
	};
}

export const revokeClient = (clientId: string, now = new Date()): AdminPlan<{ client_id: string }> => ({
	statements: [updateSql("api_clients", { revoked_at: now.toISOString() }, { column: "id", value: clientId })],
	output: { client_id: clientId },
});
