"""The building blocks: what some method plugins share, built on the machinery and imported by the plugins that use
them (``from stackrl.blocks.teacher import distilled``). The machinery never imports them; docs/architecture.md
lays out the layers."""
