"""The one exception type the compiler raises for bad input."""


class MJCFError(ValueError):
    """Bad MJCF input: malformed XML, unknown element or attribute, bad value, missing file,
    or a MuJoCo feature mjx_lite does not implement. The message starts with
    ``file:line: <element name="...">`` wherever the input has a location."""
