#!/bin/bash
echo "tool 1.9.3"
