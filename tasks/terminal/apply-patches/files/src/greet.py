def greet(name):
    return "Hello, " + name


def farewell(name):
    return "Bye, " + name
