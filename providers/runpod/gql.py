"""The GraphQL documents we send (the legacy API, used only where REST v2 has nothing): secrets, spot.

Always sent with variables; never built by string interpolation. Shapes follow RunPod's own provider
branch (github.com/runpod/pulumi-runpod-native) and runpod-python's `PodRentInterruptableInput`
(github.com/runpod/runpod-python).
"""

# ruff: noqa: S105 -- these are GraphQL documents naming secret operations, not secrets.

# The cheapest question GraphQL answers: whether it answers at all (a retired API says 410 Gone).
PROBE = "query Probe { myself { id } }"

SECRETS_QUERY = "query Secrets { myself { secrets { id name description createdAt } } }"

SECRET_CREATE = (
    "mutation SecretCreate($input: SecretCreateInput!) { secretCreate(input: $input) { id name } }"
)

SECRET_VALUE_UPDATE = (
    "mutation SecretValueUpdate($input: SecretValueUpdateInput!) "
    "{ secretValueUpdate(input: $input) { id name } }"
)

# `ID!`, not `String!`: RunPod's own provider declares the id so (pulumi-runpod-native provider/secret.go),
# and a strict GraphQL server refuses a String variable in an ID position. The answer is null (Void).
SECRET_DELETE = "mutation SecretDelete($id: ID!) { secretDelete(id: $id) }"

SPOT_RENT = (
    "mutation PodRentInterruptable($input: PodRentInterruptableInput!) "
    "{ podRentInterruptable(input: $input) { id } }"
)
