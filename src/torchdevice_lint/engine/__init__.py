"""The engine: the batched LibCST pass, its per-file context, the rule base, ``noqa``, the
ast->LibCST bridge and the fixer. It is handed its rules; it never imports them."""
