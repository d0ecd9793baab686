"""`python -m brownout.proxy` is the `brownout` command."""

from brownout.proxy.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    main(prog_name="brownout")
