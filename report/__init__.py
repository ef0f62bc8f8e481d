"""The pull-request preview report: parse `pulumi preview` output, price it, render Markdown and JSON."""
