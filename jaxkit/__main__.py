"""``python -m jaxkit``: the tour (``jaxkit.magics.tour``; also the ``jaxkit-tour`` command)."""
from jaxkit.magics.tour import main

if __name__ == "__main__":
    main()
