"""Rendering: a pool's MachineConfigs merged into its rendered MachineConfig, named as upstream's
render controller names it (`render_pool`). Pure: no I/O."""

from mcd.render.pool import (
    GENERATED_BY_ANNOTATION,
    OS_IMAGE_URL_OVERRIDDEN_ANNOTATION,
    ROLE_LABEL,
    RenderError,
    is_in_pool,
    labels_of,
    render_pool,
    rendered_name,
    source_refs,
)

__all__ = [
    "GENERATED_BY_ANNOTATION",
    "OS_IMAGE_URL_OVERRIDDEN_ANNOTATION",
    "ROLE_LABEL",
    "RenderError",
    "is_in_pool",
    "labels_of",
    "render_pool",
    "rendered_name",
    "source_refs",
]
