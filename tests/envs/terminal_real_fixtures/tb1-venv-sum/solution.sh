#!/bin/bash
python -c 'import os; print(sum(float(x) for x in open(os.environ["PRICE_FILE"])))' > /app/total.txt
