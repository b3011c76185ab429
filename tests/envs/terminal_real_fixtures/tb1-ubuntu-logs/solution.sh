#!/bin/bash
grep -c ERROR /app/logs/app.log > /app/errors.txt
