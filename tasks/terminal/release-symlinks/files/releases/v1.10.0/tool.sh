#!/bin/bash
echo "tool 1.10.0"
