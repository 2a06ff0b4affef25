"""Schemathesis hooks of the contract journey (server/tests/contract.rs).

A generated start names a random workflow and revision, so it is answered
404 or 409 and the stateful phase has no run to follow the document's links
from. This hook turns a generated `POST /v1/runs` body that is already valid
against the document (exactly `workflow`, `revision` and `input`, both
names strings) into a start of the deployment's workflow at its active
revision with an input the workflow accepts, in about half of the cases;
and a valid body that already names that workflow and revision (taken from
an answer) gets that input too: the workflow's input schema belongs to the
deployment, not to the document. An invalid (negative) body is left as
generated, so it stays invalid.

The start body comes from the environment: `COORDINATOR_CONTRACT_START`,
a JSON object with `workflow`, `revision` and `input`.
"""

import json
import os
import zlib

import schemathesis

START = json.loads(os.environ.get("COORDINATOR_CONTRACT_START", "null"))


@schemathesis.hook
def map_body(context, body):
    operation = context.operation
    if START is None or operation is None:
        return body
    if operation.method.upper() != "POST" or operation.path != "/v1/runs":
        return body
    if not isinstance(body, dict) or set(body) != {"workflow", "revision", "input"}:
        return body
    if not isinstance(body["workflow"], str) or not isinstance(body["revision"], str):
        return body
    if body["workflow"] == START["workflow"] and body["revision"] == START["revision"]:
        # The workflow's input schema is the deployment's, not the
        # document's: a start of the served revision carries an input it
        # accepts (input.invalid is tested in server/tests/service.rs).
        return dict(START)
    # Deterministic under the run's seed: the choice follows the drawn body.
    if zlib.crc32(json.dumps(body, sort_keys=True).encode()) % 2:
        return body
    return dict(START)
