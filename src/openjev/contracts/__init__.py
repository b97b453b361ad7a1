"""The wire contracts openjev serves, each a translation to and from the contract-neutral core.

- `systemone`: TypeSafe's System One API (`POST /v1/systemone`);
- `decisions`: OpenAI's Decisions API (`POST /v1/decisions`).

A contract parses and checks its request, turns it into a `Decision`, and turns the use case's
`Outcome` (and its errors) into its response. Each package exports one `ContractSpec` (`spec`);
`registry.CONTRACTS` lists them, and the HTTP layer serves whatever is listed there. Nothing
outside a contract knows its wire shape.
"""
