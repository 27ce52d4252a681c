"""Report: plain-text and Markdown tables for the terminal and files, and every plot."""
