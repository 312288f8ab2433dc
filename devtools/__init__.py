"""Development tools that never ship: the local runtime on moto (``devtools.local``) and the
demo (``python -m devtools.demo``). Not in the wheel, the Lambda layer or the EMR archive."""
