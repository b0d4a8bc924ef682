"""``python -m strand_operator --bootstrap HOST:PORT --namespace NS --cluster NAME``."""

from strand_operator.cli import main

main()
