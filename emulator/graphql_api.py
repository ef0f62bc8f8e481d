"""The GraphQL subset v2 lacks: console secrets and legacy spot pods, answered the GraphQL way.

RunPod is retiring GraphQL (rate-limited in stages, then 410 Gone; docs/RUNPOD-CONTRACT.md): the limit
`graphql` ("on", "gone", "limited") and the fault `graphqlNext`/`graphqlStatus` answer every request here
410 Gone, or 429 with Retry-After, before any document is read.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from graphql import (
    GraphQLError,
    GraphQLResolveInfo,
    GraphQLSchema,
    OperationDefinitionNode,
    OperationType,
    build_schema,
    graphql_sync,
    parse,
)

from emulator.jsonbody import parse_json
from emulator.models import PodRecord, SecretRecord
from emulator.pods import (
    check_image,
    check_ports,
    container_fields,
    new_pod,
    record_created,
    start_pod,
    volume_placement,
)
from emulator.problems import ApiError
from emulator.views import iso
from emulator.world import World, new_id

# Ids are `ID`, as in the documents RunPod's own clients send (runpod/pulumi-runpod-native
# provider/secret.go: `query GetSecret($id: ID!) { secret(id: $id) {...} }`,
# `mutation DeleteSecret($id: ID!) { secretDelete(id: $id) }`, whose answer is `Void`, i.e. null), and
# Secret carries the fields those documents select (id, name, description, createdAt, updatedAt).
SDL = """
scalar Void
type Query { myself: User!  secret(id: ID!): Secret }
type User { id: ID!  secrets(name: String, id: ID): [Secret!]! }
type Secret { id: ID!  name: String!  description: String  createdAt: String!  updatedAt: String! }
type Pod { id: ID!  name: String!  desiredStatus: String!  costPerHr: Float!  gpuCount: Int!
           imageName: String  dataCenterId: String  bidPerGpu: Float }
enum CloudTypeEnum { SECURE COMMUNITY ALL }
input SecretCreateInput { name: String!  value: String!  description: String }
input SecretValueUpdateInput { id: ID!  value: String! }
input SecretDescriptionUpdateInput { id: ID!  description: String! }
input EnvironmentVariableInput { key: String!  value: String! }
input PodRentInterruptableInput {
  bidPerGpu: Float!  gpuTypeId: String!  gpuCount: Int!  imageName: String!  name: String
  cloudType: CloudTypeEnum  containerDiskInGb: Int  volumeInGb: Int  volumeMountPath: String
  dockerArgs: String  ports: String  env: [EnvironmentVariableInput!]  networkVolumeId: String
  dataCenterId: String  startSsh: Boolean  supportPublicIp: Boolean  minVcpuCount: Int  minMemoryInGb: Int
}
input PodBidResumeInput { podId: String!  bidPerGpu: Float!  gpuCount: Int }
type Mutation {
  secretCreate(input: SecretCreateInput!): Secret
  secretValueUpdate(input: SecretValueUpdateInput!): Secret
  secretDescriptionUpdate(input: SecretDescriptionUpdateInput!): Secret
  secretDelete(id: ID!): Void
  podRentInterruptable(input: PodRentInterruptableInput!): Pod
  podBidResume(input: PodBidResumeInput!): Pod
}
"""
# RunPod withdrew spot on 2026-05-06 (docs.runpod.io/pods/pricing); this is how a refusal reads here.
SPOT_WITHDRAWN = (
    "Interruptible (spot) pods are no longer offered. Deploy on-demand instead: POST /v2/pods, "
    "or the 'capacity: on_demand' setting."
)


def _world(info: GraphQLResolveInfo[World]) -> World:
    world: World = info.context
    return world


def _secret(record: SecretRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "name": record.name,
        "description": record.description,
        "createdAt": iso(record.created_at),
        "updatedAt": iso(record.updated_at if record.updated_at is not None else record.created_at),
    }


def resolve_myself(_root: object, info: GraphQLResolveInfo[World]) -> dict[str, Any]:
    world = _world(info)

    # graphql-core calls a callable field value with (info, **args).
    def secrets(
        _info: GraphQLResolveInfo[World], name: str | None = None, id: str | None = None
    ) -> list[dict[str, Any]]:
        found = [s for s in world.secrets.values() if name in (None, s.name) and id in (None, s.id)]
        return [_secret(s) for s in found]

    return {"id": "local-user", "secrets": secrets}


def resolve_secret(_root: object, info: GraphQLResolveInfo[World], id: str) -> dict[str, Any] | None:
    """`secret(id:)`: null when there is none, which RunPod's provider reads as deleted."""
    record = _world(info).secrets.get(id)
    return None if record is None else _secret(record)


def secret_create(_root: object, info: GraphQLResolveInfo[World], input: dict[str, Any]) -> dict[str, Any]:
    world, name = _world(info), input["name"]
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise GraphQLError("Secret names may use letters, digits, '_' and '-' only.")
    if any(s.name == name for s in world.secrets.values()):
        raise GraphQLError(
            f"A secret named {name!r} already exists; names are immutable, update its value instead."
        )
    record = SecretRecord(
        id=new_id(), name=name, description=input.get("description"), created_at=world.now()
    )
    world.secret_values[name] = input["value"]
    world.save(record)
    world.audit("secret.create", "secret", record.id, record.name)
    return _secret(record)


def _find_secret(world: World, ident: str) -> SecretRecord:
    record = world.secrets.get(ident)
    if record is None:
        raise GraphQLError(f"Secret {ident!r} was not found.")
    return record


def secret_update(_root: object, info: GraphQLResolveInfo[World], input: dict[str, Any]) -> dict[str, Any]:
    world = _world(info)
    record = _find_secret(world, input["id"])
    record.value_version += 1
    record.updated_at = world.now()
    world.secret_values[record.name] = input["value"]
    world.save(record)
    world.audit("secret.update", "secret", record.id, record.name, valueVersion=record.value_version)
    return _secret(record)


def secret_describe(_root: object, info: GraphQLResolveInfo[World], input: dict[str, Any]) -> dict[str, Any]:
    world = _world(info)
    record = _find_secret(world, input["id"])
    record.description, record.updated_at = input["description"], world.now()
    world.save(record)
    world.audit("secret.describe", "secret", record.id, record.name)
    return _secret(record)


def secret_delete(_root: object, info: GraphQLResolveInfo[World], id: str) -> None:
    """Answers null (`Void`), as RunPod's docs and its provider's comment on `secretDelete` say."""
    world = _world(info)
    record = _find_secret(world, id)
    world.forget(record)
    world.secret_values.pop(record.name, None)
    world.audit("secret.delete", "secret", record.id, record.name)


def _pod(world: World, pod: PodRecord) -> dict[str, Any]:
    return {
        "id": pod.id,
        "name": pod.name,
        "desiredStatus": "EXITED" if pod.halted else "RUNNING",
        "costPerHr": pod.hourly_cost,
        "gpuCount": pod.gpu_count,
        "imageName": pod.image,
        "dataCenterId": pod.data_center_id,
        "bidPerGpu": pod.bid_per_gpu,
    }


def _check_bid(world: World, gpu_id: str, bid: float) -> None:
    gpu = world.catalog.gpu(gpu_id)
    if gpu is None:
        raise GraphQLError(f"GPU type {gpu_id!r} is not offered.")
    if bid < gpu.spotMinBid:
        raise GraphQLError(
            f"Bid ${bid:.2f}/GPU-h is below the current minimum of ${gpu.spotMinBid:.2f} for {gpu_id}."
        )


def _spot_body(input: dict[str, Any]) -> dict[str, Any]:
    """The legacy input expressed as a v2 create body, so both paths share the same rules."""
    ports = [p.strip() for p in (input.get("ports") or "").split(",") if p.strip()]
    check_image(input.get("imageName"))
    check_ports(ports)
    gpu_id = input["gpuTypeId"]
    body: dict[str, Any] = {
        "name": input.get("name") or f"spot-{gpu_id.split()[-1].lower()}",
        "image": input["imageName"],
        "args": input.get("dockerArgs") or "",
        "disk": input.get("containerDiskInGb") or 50,
        "ports": ports,
        "env": {e["key"]: e["value"] for e in input.get("env") or []},
        "startSsh": bool(input.get("startSsh")),
        "dataCenterIds": [input["dataCenterId"]] if input.get("dataCenterId") else [],
    }
    if input.get("networkVolumeId"):
        path = input.get("volumeMountPath") or "/workspace"
        body["mounts"] = {"network": [{"volumeId": input["networkVolumeId"], "path": path}]}
    return body


def rent_interruptable(
    _root: object, info: GraphQLResolveInfo[World], input: dict[str, Any]
) -> dict[str, Any]:
    world = _world(info)
    if not world.limits.offerSpot:
        raise GraphQLError(SPOT_WITHDRAWN, extensions={"code": "SPOT_NOT_OFFERED"})
    gpu_id, count, bid = input["gpuTypeId"], input["gpuCount"], input["bidPerGpu"]
    _check_bid(world, gpu_id, bid)
    cloud = "COMMUNITY" if input.get("cloudType") == "COMMUNITY" else "SECURE"
    world.gpu_price(gpu_id, cloud, count)
    body = _spot_body(input)
    candidates = world.candidates(gpu_id, body["dataCenterIds"])
    candidates, volume_id, volume_path = volume_placement(world, body, cloud, candidates)
    world.check_money(bid * count)
    dc_id = world.place(gpu_id, candidates, count)
    placement = {"data_center_id": dc_id, "volume_id": volume_id, "volume_path": volume_path}
    pod = new_pod(
        world, **container_fields(body), **placement, cloud=cloud, gpu_id=gpu_id, gpu_count=count,
        cost_per_gpu=bid, spot=True, bid_per_gpu=bid,
    )  # fmt: skip
    record_created(world, pod, spot=True, bidPerGpu=bid)
    return _pod(world, pod)


def bid_resume(_root: object, info: GraphQLResolveInfo[World], input: dict[str, Any]) -> dict[str, Any]:
    world = _world(info)
    if not world.limits.offerSpot:
        raise GraphQLError(SPOT_WITHDRAWN, extensions={"code": "SPOT_NOT_OFFERED"})
    pod = world.pods.get(input["podId"])
    if pod is None or not pod.spot:
        raise GraphQLError(f"Spot pod {input['podId']!r} was not found.")
    if pod.halted is None:
        raise GraphQLError(f"Pod {pod.id} is not stopped; only an EXITED spot pod can resume.")
    _check_bid(world, pod.gpu_id, input["bidPerGpu"])
    pod.cost_per_gpu = pod.bid_per_gpu = input["bidPerGpu"]
    start_pod(world, pod)
    world.save(pod)
    world.audit("pod.resume", "pod", pod.id, pod.name, bidPerGpu=pod.bid_per_gpu)
    return _pod(world, pod)


def build() -> GraphQLSchema:
    schema = build_schema(SDL)
    assert schema.query_type is not None and schema.mutation_type is not None
    schema.query_type.fields["myself"].resolve = resolve_myself
    schema.query_type.fields["secret"].resolve = resolve_secret
    resolvers = {
        "secretCreate": secret_create,
        "secretValueUpdate": secret_update,
        "secretDescriptionUpdate": secret_describe,
        "secretDelete": secret_delete,
        "podRentInterruptable": rent_interruptable,
        "podBidResume": bid_resume,
    }
    for name, resolver in resolvers.items():
        schema.mutation_type.fields[name].resolve = _as_graphql_errors(resolver)
    return schema


def _as_graphql_errors(resolver: Any) -> Any:
    """Rule violations shared with v2 (capacity, money) surface as GraphQL errors, not HTTP statuses."""

    def wrapped(root: object, info: GraphQLResolveInfo[World], **args: Any) -> Any:
        try:
            return resolver(root, info, **args)
        except ApiError as exc:
            raise GraphQLError(exc.detail, extensions={"status": exc.status}) from None

    return wrapped


router = APIRouter()
SCHEMA = build()


def _bad_request(message: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"errors": [{"message": message}]}, status_code=status)


def _is_mutation(query: str, operation_name: str | None) -> bool:
    try:
        document = parse(query)
    except GraphQLError:
        return False  # graphql_sync reports the syntax error itself
    ops = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    chosen = [o for o in ops if operation_name is None or (o.name and o.name.value == operation_name)]
    return any(o.operation == OperationType.MUTATION for o in chosen)


GONE = "The GraphQL API has been retired. Use the REST API (https://rest.runpod.io/v2) instead."
LIMITED = "The GraphQL API is rate limited while it is being retired. Retry later, or use the REST API."


def retired(world: World) -> JSONResponse | None:
    """The answer of a retired (410) or rate-limited (429) GraphQL, from the limits or a fault; else None."""
    limits, faults = world.limits, world.faults
    status, retry_after = None, limits.graphqlRetryAfterS
    if faults.take_graphql():
        status, retry_after = faults.config.graphqlStatus, faults.config.graphqlRetryAfterS
    elif limits.graphql != "on":
        status = 410 if limits.graphql == "gone" else 429
    if status is None:
        return None
    world.audit("graphql.refused", "account", None, None, status=status)
    if status == 410:
        return JSONResponse({"errors": [{"message": GONE}]}, status_code=410)
    headers = {"Retry-After": str(retry_after)}
    return JSONResponse({"errors": [{"message": LIMITED}]}, status_code=429, headers=headers)


@router.post("/graphql")
async def graphql_endpoint(request: Request) -> JSONResponse:
    refusal = retired(request.app.state.world)
    if refusal is not None:
        return refusal
    try:
        payload = parse_json(await request.body())
    except ApiError as exc:
        return _bad_request(exc.detail)
    if not isinstance(payload, dict) or not isinstance(payload.get("query"), str):
        return _bad_request("POST a JSON object with a 'query' string.")
    variables, name = payload.get("variables"), payload.get("operationName")
    name = name if isinstance(name, str) else None
    try:
        if request.state.read_only and _is_mutation(payload["query"], name):
            return _bad_request("access denied: this API key is read-only.", 403)
        result = graphql_sync(
            SCHEMA,
            payload["query"],
            variable_values=variables if isinstance(variables, dict) else None,
            operation_name=name,
            context_value=request.app.state.world,
        )
    except RecursionError:
        return _bad_request("The query nests too deeply to parse.")
    # GraphQL answers client errors with HTTP 200 and an `errors` array (as runpod-python handles it).
    return JSONResponse(result.formatted)
