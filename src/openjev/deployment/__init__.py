"""What the Modal deployment (modal_app.py) runs besides the server.

`image_env`: the image's install of the API on top of SGLang's environment, and its check.
`checkpoint`: the pinned checkpoint fetched once into the Volume, and the check a GPU container
starts with. `tokenizer_parity`: whether the served tokenizer gives the base model's token ids.
"""
