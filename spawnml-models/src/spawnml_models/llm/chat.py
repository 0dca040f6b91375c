"""Chat templates (``tokenizer.chat_template``) rendered with jinja2 in a sandbox, as transformers does.

jinja2 is imported when a template renders: registering the text-generation model must not load it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from spawnml import InvalidArgumentError

if TYPE_CHECKING:
    from jinja2 import Template

Message = dict[str, str]


def _raise_exception(message: str) -> None:
    from jinja2.exceptions import TemplateError

    raise TemplateError(message)


class ChatTemplate:
    """A model's chat template: a list of messages -> the prompt text the model was trained on."""

    def __init__(self, source: str, bos_token: str = "", eos_token: str = "") -> None:
        self.source, self.bos_token, self.eos_token = source, bos_token, eos_token

    @cached_property
    def _template(self) -> Template:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        environment.globals["raise_exception"] = _raise_exception
        return environment.from_string(self.source)

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
        """The prompt for ``messages`` (dicts with ``role`` and ``content``), opening the assistant's
        turn when ``add_generation_prompt``."""
        from jinja2.exceptions import TemplateError

        try:
            return self._template.render(
                messages=list(messages),
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
            )
        except TemplateError as error:
            raise InvalidArgumentError(f"the model's chat template failed: {error}") from None
