"""The wire contracts openjev serves, each a translation to and from the contract-neutral core.

- `systemone`: TypeSafe's System One API (`POST /v1/systemone`);
- `decisions`: OpenAI's Decisions API (`POST /v1/decisions`).

A contract parses and checks its request, turns it into a `Decision`, and turns the use case's
`Outcome` (and its errors) into its response. Nothing outside a contract knows its wire shape.
"""
