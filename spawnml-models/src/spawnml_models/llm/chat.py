"""Chat templates (``tokenizer.chat_template``) rendered with jinja2 in a sandbox, as transformers does."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from jinja2 import Template
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from spawnml import InvalidArgumentError

Message = dict[str, str]


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


class ChatTemplate:
    """A model's chat template: a list of messages -> the prompt text the model was trained on."""

    def __init__(self, source: str, bos_token: str = "", eos_token: str = "") -> None:
        self.source, self.bos_token, self.eos_token = source, bos_token, eos_token

    @cached_property
    def _template(self) -> Template:
        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        environment.globals["raise_exception"] = _raise_exception
        return environment.from_string(self.source)

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
        """The prompt for ``messages`` (dicts with ``role`` and ``content``), opening the assistant's
        turn when ``add_generation_prompt``."""
        try:
            return self._template.render(
                messages=list(messages),
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
            )
        except TemplateError as error:
            raise InvalidArgumentError(f"the model's chat template failed: {error}") from None
