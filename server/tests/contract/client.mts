// A client someone else generated: `openapi-typescript` turned
// docs/openapi.json into `api.d.ts` (paths and components), and
// `openapi-fetch` calls the service through those types. Compiled with
// `tsc --strict` and run with `node` by server/tests/contract.rs against
// the real `coordinator`: a start (201), its status read until `finished`,
// and a start of another revision refused with `revision.not-active` (409)
// as a typed problem document. Exits non-zero on anything else.

import createClient from "openapi-fetch";
import type { components, paths } from "./api.js";

// Node's globals, declared here: the journey installs no @types/node.
declare const process: {
  env: Record<string, string | undefined>;
  exit(code: number): never;
};

type RunStatus = components["schemas"]["RunStatus"];
type Problem = components["schemas"]["Problem"];

function required(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") {
    throw new Error(`${name} is not set`);
  }
  return value;
}

const baseUrl = required("COORDINATOR_BASE");
const token = required("COORDINATOR_TOKEN");
const workflow = required("COORDINATOR_WORKFLOW");
const revision = required("COORDINATOR_REVISION");
const input: unknown = JSON.parse(required("COORDINATOR_INPUT"));

const client = createClient<paths>({
  baseUrl,
  headers: { Authorization: `Bearer ${token}` },
});

async function start(key: string, at: string): Promise<{ status: number; run?: RunStatus; problem?: Problem }> {
  const { data, error, response } = await client.POST("/v1/runs", {
    params: { header: { "Idempotency-Key": key } },
    body: { workflow, revision: at, input },
  });
  if (data !== undefined) {
    return { status: response.status, run: data };
  }
  return { status: response.status, problem: error };
}

async function status(run: string): Promise<RunStatus> {
  const { data, error, response } = await client.GET("/v1/runs/{run}", {
    params: { path: { run } },
  });
  if (data === undefined) {
    throw new Error(`status ${response.status}: ${JSON.stringify(error)}`);
  }
  return data;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function main(): Promise<void> {
  const started = await start(`typed-client-${Date.now()}`, revision);
  if (started.status !== 201 || started.run === undefined) {
    throw new Error(`start: ${started.status} ${JSON.stringify(started.problem)}`);
  }
  const run: string = started.run.run;
  let current: RunStatus = started.run;
  const deadline = Date.now() + 30_000;
  while (current.state !== "finished") {
    if (Date.now() > deadline) {
      throw new Error(`run ${run} is ${current.state} after 30 s`);
    }
    await sleep(200);
    current = await status(run);
  }
  // Declared always present: `null` or a string, never absent.
  const outcome: string | null = current.outcome;
  const endedAt: string | null = current.endedAt;
  if (outcome === null || endedAt === null) {
    throw new Error(`finished without an outcome or an end: ${JSON.stringify(current)}`);
  }

  const refused = await start(`typed-client-refused-${Date.now()}`, "sha256:" + "0".repeat(64));
  const code: string | undefined = refused.problem?.code;
  if (refused.status !== 409 || code !== "revision.not-active") {
    throw new Error(`refused start: ${refused.status} ${JSON.stringify(refused.problem)}`);
  }
  console.log(JSON.stringify({ run, state: current.state, outcome, refused: code }));
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
});
