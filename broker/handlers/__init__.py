"""One module per Kafka API; each declares API_KEY, MIN_VERSION, MAX_VERSION and handle().

Modules are discovered, not listed: adding ``broker/handlers/<api>.py`` is all
it takes for KafkaApis to route the API and for ApiVersions to advertise it.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def _discover() -> tuple[ModuleType, ...]:
    modules = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "API_KEY") and hasattr(module, "handle"):
            modules.append(module)
    keys = [m.API_KEY for m in modules]
    duplicates = {k for k in keys if keys.count(k) > 1}
    if duplicates:
        raise ImportError(f"more than one handler module for API keys {sorted(duplicates)}")
    return tuple(modules)


MODULES = _discover()
